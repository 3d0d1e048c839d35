-- survey (package move) on Babelfish for PostgreSQL: what move/survey.sql
-- measures, with PostgreSQL's own length functions. Babelfish has no
-- Latin1_General_100_BIN2_UTF8 collation, and its DATALENGTH of an
-- NVARCHAR counts the UTF-8 bytes PostgreSQL stores, not UTF-16 ones.
-- The key is counted in characters (char_length), so a character outside
-- the BMP counts one, not two as on SQL Server.
SELECT COALESCE(MAX(DATALENGTH(j.payload)), 0),
       COALESCE(MAX(CAST(pg_catalog.octet_length(j.dedupe_key) AS BIGINT)), 0),
       COALESCE(MAX(CAST(pg_catalog.char_length(j.dedupe_key) AS BIGINT)), 0)
FROM {{table "jobs"}} AS j
WHERE (@all_queues = 1 OR j.queue IN (SELECT v.queue FROM (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}(@q{{$i}}){{end}}) AS v (queue)))
  AND ((j.state = 'ready' AND j.run_at <= SYSUTCDATETIME() AND @ready = 1)
    OR (j.state = 'ready' AND j.run_at > SYSUTCDATETIME() AND @scheduled = 1)
    OR (j.state = 'dead' AND @dead = 1));
