-- export (package move) on Babelfish for PostgreSQL: what move/export.sql
-- does, with the rows locked by an UPDATE instead of UPDLOCK, which
-- Babelfish ignores (locking is PostgreSQL's: a SELECT takes no row lock).
-- Without it a claim took a job an open batch held (TestLiveMoveBetweenSchemas),
-- which would then run at the source and be imported too. The pick goes
-- into @pick, the no-op UPDATE takes PostgreSQL's row locks until the
-- batch's transaction ends — a claim's DELETE that reaches one of these
-- rows waits, then skips it once the commit has deleted it — and the rows
-- still selected after it are returned in id order. A row taken between
-- the pick and the UPDATE is neither locked nor returned.
SET NOCOUNT ON;
DECLARE @pick TABLE (id BIGINT NOT NULL PRIMARY KEY);
INSERT INTO @pick (id)
SELECT TOP (@limit) j.id
FROM {{table "jobs"}} AS j
WHERE j.id > @after
  AND (@all_queues = 1 OR j.queue IN (SELECT v.queue FROM (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}(@q{{$i}}){{end}}) AS v (queue)))
  AND ((j.state = 'ready' AND j.run_at <= SYSUTCDATETIME() AND @ready = 1)
    OR (j.state = 'ready' AND j.run_at > SYSUTCDATETIME() AND @scheduled = 1)
    OR (j.state = 'dead' AND @dead = 1))
ORDER BY j.id;
UPDATE j SET priority = j.priority
FROM {{table "jobs"}} AS j
INNER JOIN @pick AS k ON j.id = k.id;
SELECT j.id, j.queue, j.kind, j.payload, j.priority, j.run_at, j.attempt, j.max_attempts,
       j.state, j.last_error, j.dedupe_key, j.created_at
FROM {{table "jobs"}} AS j
INNER JOIN @pick AS k ON j.id = k.id
WHERE j.id > @after
  AND (@all_queues = 1 OR j.queue IN (SELECT v.queue FROM (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}(@q{{$i}}){{end}}) AS v (queue)))
  AND ((j.state = 'ready' AND j.run_at <= SYSUTCDATETIME() AND @ready = 1)
    OR (j.state = 'ready' AND j.run_at > SYSUTCDATETIME() AND @scheduled = 1)
    OR (j.state = 'dead' AND @dead = 1))
ORDER BY j.id;
