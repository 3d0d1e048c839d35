-- Lease expiry, step 2 (READ COMMITTED transaction): lock the still-expired
-- candidates by primary key, skipping any a holder is completing right now.
SELECT id
FROM {{.Jobs}} FORCE INDEX (PRIMARY)
WHERE id IN ({{.List}}) AND state = 'claimed' AND claimed_until < UTC_TIMESTAMP(6)
FOR UPDATE SKIP LOCKED
