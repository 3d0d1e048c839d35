-- Lease expiry, step 1 (no transaction, no locks): the expired leases of
-- one queue, found among its jobs in flight through the claim index.
SELECT id
FROM {{table "jobs"}} FORCE INDEX ({{ident "jobs_claim"}})
WHERE queue = ? AND state = 'claimed' AND claimed_until < UTC_TIMESTAMP(6)
LIMIT ?
