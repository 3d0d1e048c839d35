-- insert (package move) on Babelfish for PostgreSQL: move/insert.sql with
-- the ids drawn as in babelfish/enqueue.sql (no OVER, an ORDER BY instead).
SET NOCOUNT ON;
DECLARE @ids TABLE (
    id         BIGINT        NOT NULL PRIMARY KEY,
    queue      VARCHAR(64)   COLLATE Latin1_General_BIN2 NOT NULL,
    dedupe_key NVARCHAR(200) COLLATE Latin1_General_100_BIN2 NULL
);
INSERT INTO {{table "jobs"}} (id, queue, kind, payload, priority, run_at,
       attempt, max_attempts, state, last_error, dedupe_key, created_at)
OUTPUT inserted.id, inserted.queue, inserted.dedupe_key INTO @ids (id, queue, dedupe_key)
SELECT NEXT VALUE FOR {{sequence "jobs_id_seq"}},
       v.queue, v.kind, v.payload, v.priority, CONVERT(DATETIME2(6), SWITCHOFFSET(v.run_at, '+00:00')),
       v.attempt, v.max_attempts, v.state, v.last_error, v.dedupe_key,
       CONVERT(DATETIME2(6), SWITCHOFFSET(v.created_at, '+00:00'))
FROM (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}({{$i}}, @q{{$i}}, @kn{{$i}}, @p{{$i}}, @pr{{$i}}, @ra{{$i}}, @a{{$i}}, @ma{{$i}}, @s{{$i}}, @e{{$i}}, @k{{$i}}, @c{{$i}}){{end}}) AS v (ord, queue, kind, payload, priority, run_at, attempt, max_attempts,
       state, last_error, dedupe_key, created_at)
ORDER BY v.ord;
INSERT INTO {{table "jobs_dedupe"}} (queue, dedupe_key, id)
SELECT queue, dedupe_key, id FROM @ids;
SELECT id FROM @ids ORDER BY id;
