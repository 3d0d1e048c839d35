-- survey: the largest payload in bytes and the longest dedupe key, in
-- UTF-8 bytes and in UTF-16 code units, among the stored jobs the filter
-- selects. The UTF-8 length comes from converting the key to VARCHAR
-- under a UTF-8 collation (SQL Server 2019 and later); a CAST keeps its
-- input's collation, and so its code page. A code unit is a character except
-- for a character outside the BMP, which counts two: the count is never
-- below the key's characters. @all_queues = 1 keeps every queue, otherwise
-- only the queues of the VALUES list. Held jobs (in jobs_inflight) are not
-- exported, so they are not measured.
SELECT COALESCE(MAX(DATALENGTH(j.payload)), 0),
       COALESCE(MAX(CAST(DATALENGTH(k.utf8) AS BIGINT)), 0),
       COALESCE(MAX(CAST(DATALENGTH(j.dedupe_key) / 2 AS BIGINT)), 0)
FROM {{table "jobs"}} AS j
CROSS APPLY (SELECT CAST(u.key_utf8 AS VARCHAR(800)) AS utf8
             FROM (SELECT j.dedupe_key COLLATE Latin1_General_100_BIN2_UTF8 AS key_utf8) AS u) AS k
WHERE (@all_queues = 1 OR j.queue IN (SELECT v.queue FROM (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}(@q{{$i}}){{end}}) AS v (queue)))
  AND ((j.state = 'ready' AND j.run_at <= SYSUTCDATETIME() AND @ready = 1)
    OR (j.state = 'ready' AND j.run_at > SYSUTCDATETIME() AND @scheduled = 1)
    OR (j.state = 'dead' AND @dead = 1));
