-- RetryDead of a whole queue, step 1 (no transaction, no locks): up to ?
-- dead jobs of queue ?, from the claim index's (queue, 'dead') range.
SELECT id
FROM {{table "jobs"}} FORCE INDEX ({{ident "jobs_claim"}})
WHERE queue = ? AND state = 'dead'
ORDER BY priority, run_at, id
LIMIT ?
