-- Step 1 of a claim, outside the locking transaction (autocommit, so no read
-- view outlives it; it may run on a replica): the ids of a window of ready
-- jobs in claim order. The window is n times the claimer's spread, and the
-- claimer locks n of it in a few runs at random places, so concurrent
-- claimers do not all go for the same first rows. A covering range scan of
-- the claim index that stops at the LIMIT. It takes no locks, and on the
-- claimer's session it reads uncommitted: a row another claimer's UPDATE
-- has taken is already gone from the index range. Step 2 re-checks all.
-- A paused queue (one primary-key probe of the queues table) has no
-- candidates, so claiming from it opens no transaction.
SELECT id
FROM {{table "jobs"}} FORCE INDEX ({{ident "jobs_claim"}})
WHERE queue = ? AND state = 'ready' AND run_at <= UTC_TIMESTAMP(6)
  AND NOT EXISTS (SELECT 1 FROM {{table "queues"}} WHERE queue = ? AND paused)
ORDER BY priority, run_at, id
LIMIT ?
