-- Lease expiry, step 2 (READ COMMITTED transaction): lock the still-expired
-- candidates by primary key, skipping any a holder is completing right now.
SELECT id
FROM {{table "jobs"}} FORCE INDEX (PRIMARY)
WHERE id IN ({{params .N}}) AND state = 'claimed' AND claimed_until < UTC_TIMESTAMP(6)
FOR UPDATE SKIP LOCKED
