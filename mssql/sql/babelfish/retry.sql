-- retry on Babelfish for PostgreSQL: what retry.sql does, in three
-- statements in one transaction. Babelfish 4.4 takes neither a second
-- OUTPUT clause nor, in OUTPUT, a CASE over deleted's columns or a column
-- of a joined table ("missing FROM-clause entry"): the DELETE outputs the
-- rows as they were into @moved, the INSERT computes them from there.
-- https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/babelfish-compatibility.tsql.limitations.html
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @moved TABLE (
    id           BIGINT         NOT NULL PRIMARY KEY,
    queue        VARCHAR(64)    COLLATE Latin1_General_BIN2 NOT NULL,
    kind         NVARCHAR(100)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    payload      VARBINARY(MAX) NOT NULL,
    priority     SMALLINT       NOT NULL,
    attempt      INT            NOT NULL,
    max_attempts INT            NOT NULL,
    last_error   NVARCHAR(4000) NULL,
    dedupe_key   NVARCHAR(200)  COLLATE Latin1_General_100_BIN2 NULL,
    created_at   DATETIME2(6)   NOT NULL
);
BEGIN TRANSACTION;
DELETE f
OUTPUT deleted.id, deleted.queue, deleted.kind, deleted.payload, deleted.priority,
       deleted.attempt, deleted.max_attempts, deleted.last_error, deleted.dedupe_key, deleted.created_at
  INTO @moved (id, queue, kind, payload, priority, attempt, max_attempts, last_error, dedupe_key, created_at)
FROM {{table "jobs_inflight"}} AS f
INNER JOIN (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}(@i{{$i}}, @t{{$i}}){{end}}) AS l (id, token)
    ON f.id = l.id AND f.claim_token = l.token;
INSERT INTO {{table "jobs"}} (id, queue, kind, payload, priority, run_at, attempt, max_attempts, state,
       last_error, dedupe_key, created_at)
SELECT m.id, m.queue, m.kind, m.payload, m.priority,
       DATEADD(millisecond, l.delay_ms, DATEADD(second, l.delay_s, SYSUTCDATETIME())),
       CASE WHEN l.snooze = 1 THEN m.attempt ELSE m.attempt + 1 END,
       m.max_attempts,
       CASE WHEN l.snooze = 1 THEN 'ready'
            WHEN l.dead = 1 OR m.attempt + 1 >= m.max_attempts THEN 'dead'
            ELSE 'ready' END,
       CASE WHEN l.snooze = 1 THEN m.last_error ELSE l.error END,
       m.dedupe_key, m.created_at
FROM @moved AS m
INNER JOIN (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}(@i{{$i}}, @ds{{$i}}, @dm{{$i}}, @dd{{$i}}, @sn{{$i}}, @e{{$i}}){{end}}) AS l (id, delay_s, delay_ms, dead, snooze, error)
    ON m.id = l.id;
COMMIT TRANSACTION;
SELECT id FROM @moved;
