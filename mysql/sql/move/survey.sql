-- survey: the largest payload and the longest dedupe key, in bytes and in
-- characters, among the stored jobs the filter selects: those of the .N
-- queues of the IN list (every queue when .N is 0), then the ready, the
-- scheduled and the dead ones as the three flags say.
SELECT COALESCE(MAX(LENGTH(payload)), 0), COALESCE(MAX(LENGTH(dedupe_key)), 0),
       COALESCE(MAX(CHAR_LENGTH(CONVERT(dedupe_key USING utf8mb4))), 0)
FROM {{table "jobs"}}
WHERE {{if .N}}queue IN ({{params .N}}) AND {{end}}((state = 'ready' AND run_at <= UTC_TIMESTAMP(6) AND ?)
    OR (state = 'ready' AND run_at > UTC_TIMESTAMP(6) AND ?)
    OR (state = 'dead' AND ?))
