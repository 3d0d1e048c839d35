-- enqueue on Babelfish for PostgreSQL: enqueue.sql with one difference.
-- Babelfish 4.4 rejects NEXT VALUE FOR ... OVER (ORDER BY ...) (syntax
-- error near 'OVER'); without OVER it draws the ids after the ORDER BY
-- (PostgreSQL evaluates a volatile select list after sorting), so ids
-- are still in input order. SQL Server refuses NEXT VALUE FOR in a query
-- with ORDER BY unless OVER is given: this form is for Babelfish only.
-- https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/babelfish-compatibility.tsql.limitations-unsupported.html
SET NOCOUNT ON;
DECLARE @ids TABLE (
    id         BIGINT        NOT NULL PRIMARY KEY,
    queue      VARCHAR(64)   COLLATE Latin1_General_BIN2 NOT NULL,
    dedupe_key NVARCHAR(200) COLLATE Latin1_General_100_BIN2 NULL
);
INSERT INTO {{table "jobs"}} (id, queue, kind, payload, priority, run_at,
       attempt, max_attempts, state, dedupe_key, created_at)
OUTPUT inserted.id, inserted.queue, inserted.dedupe_key INTO @ids (id, queue, dedupe_key)
SELECT NEXT VALUE FOR {{sequence "jobs_id_seq"}},
       v.queue, v.kind, v.payload, v.priority,
       CASE WHEN v.run_at IS NULL
            THEN DATEADD(millisecond, v.delay_ms, DATEADD(second, v.delay_s, SYSUTCDATETIME()))
            ELSE CONVERT(DATETIME2(6), SWITCHOFFSET(v.run_at, '+00:00')) END,
       0, v.max_attempts, 'ready', v.dedupe_key, SYSUTCDATETIME()
FROM (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}({{$i}}, @q{{$i}}, @kn{{$i}}, @p{{$i}}, @pr{{$i}}, @ra{{$i}}, @ds{{$i}}, @dm{{$i}}, @ma{{$i}}, @dk{{$i}}){{end}}) AS v (ord, queue, kind, payload, priority, run_at, delay_s, delay_ms, max_attempts, dedupe_key)
ORDER BY v.ord;
INSERT INTO {{table "jobs_dedupe"}} (queue, dedupe_key, id)
SELECT queue, dedupe_key, id FROM @ids WHERE dedupe_key IS NOT NULL;
SELECT id FROM @ids ORDER BY id;
