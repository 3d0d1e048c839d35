-- export, step 2, in the batch's transaction: lock those of step 1's ids
-- that are still unheld, skipping rows a claim holds, until the batch ends.
SELECT id, queue, kind, payload, priority, run_at, attempt, max_attempts, state, last_error, dedupe_key, created_at
FROM {{table "jobs"}}
WHERE id IN ({{params .N}}) AND state IN ('ready', 'dead')
ORDER BY id
FOR UPDATE SKIP LOCKED
