-- export, step 1 (no locks): the ids after ? that the filter selects, as
-- in survey.sql, in id order, at most ?.
SELECT id
FROM {{table "jobs"}}
WHERE id > ? AND {{if .N}}queue IN ({{params .N}}) AND {{end}}((state = 'ready' AND run_at <= UTC_TIMESTAMP(6) AND ?)
    OR (state = 'ready' AND run_at > UTC_TIMESTAMP(6) AND ?)
    OR (state = 'dead' AND ?))
ORDER BY id
LIMIT ?
