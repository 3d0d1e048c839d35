-- export: up to ?6 jobs with id > ?5 that the filter selects (?1 to ?4, as
-- in survey.sql), in id order, read inside the batch's write transaction.
SELECT id, queue, kind, payload, priority, run_at, attempt, max_attempts, state, last_error, dedupe_key, created_at
FROM {{table "jobs"}} WHERE id > ?5 AND (?1 = '[]' OR queue IN (SELECT value FROM json_each(?1)))
  AND ((state = 'ready' AND run_at <= (CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000) AND ?2)
    OR (state = 'ready' AND run_at > (CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000) AND ?3)
    OR (state = 'dead' AND ?4))
ORDER BY id LIMIT ?6
