-- insert: one imported job as it was stored, unless a job of its queue
-- already holds its dedupe key; the new id comes back, none when skipped.
INSERT INTO {{table "jobs"}}
    (queue, payload, priority, run_at, attempt, max_attempts, state, last_error, dedupe_key, created_at, kind)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
ON CONFLICT (queue, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
RETURNING id
