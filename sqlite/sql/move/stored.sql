-- stored: the job of queue ?1 whose dedupe key is ?2, as export.sql reads
-- jobs.
SELECT id, queue, kind, payload, priority, run_at, attempt, max_attempts, state, last_error, dedupe_key, created_at
FROM {{table "jobs"}} WHERE queue = ?1 AND dedupe_key = ?2
