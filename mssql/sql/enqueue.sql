-- enqueue: insert the jobs of the VALUES list, record their dedupe keys and return
-- their ids ascending. Ids are drawn in input order (NEXT VALUE FOR ... OVER
-- (ORDER BY ord)), so ascending ids are input order. Runs inside a
-- transaction (the caller's or the driver's): a duplicate dedupe key fails
-- the second INSERT with error 2627 and the transaction or savepoint is
-- rolled back.
-- A row of the VALUES list is (ord, queue, kind, payload, priority, run_at,
-- delay_s, delay_ms, max_attempts, dedupe_key); run_at NULL means now +
-- delay on the database clock.
SET NOCOUNT ON;
DECLARE @ids TABLE (
    id         BIGINT        NOT NULL PRIMARY KEY,
    queue      VARCHAR(64)   COLLATE Latin1_General_BIN2 NOT NULL,
    dedupe_key NVARCHAR(200) COLLATE Latin1_General_100_BIN2 NULL
);
INSERT INTO {{table "jobs"}} (id, queue, kind, payload, priority, run_at,
       attempt, max_attempts, state, dedupe_key, created_at)
OUTPUT inserted.id, inserted.queue, inserted.dedupe_key INTO @ids (id, queue, dedupe_key)
SELECT NEXT VALUE FOR {{sequence "jobs_id_seq"}} OVER (ORDER BY v.ord),
       v.queue, v.kind, v.payload, v.priority,
       CASE WHEN v.run_at IS NULL
            THEN DATEADD(millisecond, v.delay_ms, DATEADD(second, v.delay_s, SYSUTCDATETIME()))
            ELSE CONVERT(DATETIME2(6), SWITCHOFFSET(v.run_at, '+00:00')) END,
       0, v.max_attempts, 'ready', v.dedupe_key, SYSUTCDATETIME()
FROM (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}({{$i}}, @q{{$i}}, @kn{{$i}}, @p{{$i}}, @pr{{$i}}, @ra{{$i}}, @ds{{$i}}, @dm{{$i}}, @ma{{$i}}, @dk{{$i}}){{end}}) AS v (ord, queue, kind, payload, priority, run_at, delay_s, delay_ms, max_attempts, dedupe_key);
INSERT INTO {{table "jobs_dedupe"}} (queue, dedupe_key, id)
SELECT queue, dedupe_key, id FROM @ids WHERE dedupe_key IS NOT NULL;
SELECT id FROM @ids ORDER BY id;
