-- release on Babelfish for PostgreSQL: what release.sql does, through
-- @moved in one transaction, as in babelfish/retry.sql (Babelfish 4.4
-- takes no second OUTPUT clause).
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @moved TABLE (
    id           BIGINT         NOT NULL PRIMARY KEY,
    queue        VARCHAR(64)    COLLATE Latin1_General_BIN2 NOT NULL,
    kind         NVARCHAR(100)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    payload      VARBINARY(MAX) NOT NULL,
    priority     SMALLINT       NOT NULL,
    run_at       DATETIME2(6)   NOT NULL,
    attempt      INT            NOT NULL,
    max_attempts INT            NOT NULL,
    last_error   NVARCHAR(4000) NULL,
    dedupe_key   NVARCHAR(200)  COLLATE Latin1_General_100_BIN2 NULL,
    created_at   DATETIME2(6)   NOT NULL
);
BEGIN TRANSACTION;
DELETE f
OUTPUT deleted.id, deleted.queue, deleted.kind, deleted.payload, deleted.priority, deleted.run_at,
       deleted.attempt, deleted.max_attempts, deleted.last_error, deleted.dedupe_key, deleted.created_at
  INTO @moved (id, queue, kind, payload, priority, run_at, attempt, max_attempts, last_error, dedupe_key, created_at)
FROM {{table "jobs_inflight"}} AS f
INNER JOIN (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}(@i{{$i}}, @t{{$i}}){{end}}) AS l (id, token)
    ON f.id = l.id AND f.claim_token = l.token;
INSERT INTO {{table "jobs"}} (id, queue, kind, payload, priority, run_at, attempt, max_attempts, state,
       last_error, dedupe_key, created_at)
SELECT id, queue, kind, payload, priority, run_at, attempt, max_attempts, 'ready',
       last_error, dedupe_key, created_at
FROM @moved;
COMMIT TRANSACTION;
SELECT id FROM @moved;
