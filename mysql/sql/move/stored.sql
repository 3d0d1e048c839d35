-- stored: the stored jobs of queue ? with the .N dedupe keys of the IN
-- list, a range of the dedupe index.
SELECT id, queue, kind, payload, priority, run_at, attempt, max_attempts, state, last_error, dedupe_key, created_at
FROM {{table "jobs"}}
WHERE queue = ? AND dedupe_key IN ({{params .N}})
