-- +goose Up
-- The SQL Server job schema (see ../../mssql/doc.go for the algorithm).
--
-- Ready and dead jobs live in jobs, clustered in claim order. A claim moves
-- rows into jobs_inflight with one DELETE ... OUTPUT INTO, under a lease and
-- a token; Complete deletes them there, Retry, Release and the rescue move
-- them back. Together the two tables hold the logical columns of the other
-- dialects' single table: jobs lacks claim_token and claimed_until (a row
-- there is never claimed), jobs_inflight lacks state (every row there is
-- claimed).
--
-- Ids come from a sequence, not IDENTITY, so that a row moved between the
-- tables keeps its id without SET IDENTITY_INSERT (which needs ALTER rights
-- and works on one table per session): an id never changes and is never
-- reused.
--
-- Both tables are OUTPUT INTO targets, which may have no triggers, foreign
-- keys or CHECK constraints; state is checked by the code that writes it.
-- Queue names, states and dedupe keys compare as binary strings, as on the
-- other dialects (the default collation ignores case). Times are UTC
-- (SYSUTCDATETIME()).
CREATE SEQUENCE {{table "jobs_id_seq"}} AS BIGINT START WITH 1 INCREMENT BY 1 NO CYCLE;

CREATE TABLE {{table "jobs"}} (
    id            BIGINT         NOT NULL CONSTRAINT {{ident "jobs_id_default"}} DEFAULT (NEXT VALUE FOR {{sequence "jobs_id_seq"}}),
    queue         VARCHAR(64)    COLLATE Latin1_General_BIN2 NOT NULL,
    payload       VARBINARY(MAX) NOT NULL,
    priority      SMALLINT       NOT NULL CONSTRAINT {{ident "jobs_priority_default"}} DEFAULT 0,
    run_at        DATETIME2(6)   NOT NULL CONSTRAINT {{ident "jobs_run_at_default"}} DEFAULT SYSUTCDATETIME(),
    attempt       INT            NOT NULL CONSTRAINT {{ident "jobs_attempt_default"}} DEFAULT 0,
    max_attempts  INT            NOT NULL CONSTRAINT {{ident "jobs_max_attempts_default"}} DEFAULT 25,
    state         VARCHAR(8)     COLLATE Latin1_General_BIN2 NOT NULL CONSTRAINT {{ident "jobs_state_default"}} DEFAULT 'ready',
    last_error    NVARCHAR(4000) NULL,
    dedupe_key    NVARCHAR(200)  COLLATE Latin1_General_100_BIN2 NULL,
    created_at    DATETIME2(6)   NOT NULL CONSTRAINT {{ident "jobs_created_at_default"}} DEFAULT SYSUTCDATETIME(),
    -- The claim path: a seek on (queue, 'ready') read in (priority, run_at,
    -- id) order, so ready rows of one queue are one contiguous range.
    CONSTRAINT {{ident "jobs_pk"}} PRIMARY KEY CLUSTERED (queue, state, priority, run_at, id)
);
-- A claim deletes by id: a seek here, never a scan of the queue's range.
CREATE UNIQUE NONCLUSTERED INDEX {{ident "jobs_id"}} ON {{table "jobs"}} (id);
-- An escalated table lock would fail every NOWAIT claimer.
ALTER TABLE {{table "jobs"}} SET (LOCK_ESCALATION = DISABLE);

CREATE TABLE {{table "jobs_inflight"}} (
    id            BIGINT         NOT NULL,
    queue         VARCHAR(64)    COLLATE Latin1_General_BIN2 NOT NULL,
    payload       VARBINARY(MAX) NOT NULL,
    priority      SMALLINT       NOT NULL,
    run_at        DATETIME2(6)   NOT NULL,
    attempt       INT            NOT NULL,
    max_attempts  INT            NOT NULL,
    last_error    NVARCHAR(4000) NULL,
    dedupe_key    NVARCHAR(200)  COLLATE Latin1_General_100_BIN2 NULL,
    created_at    DATETIME2(6)   NOT NULL,
    claim_token   BIGINT         NOT NULL,
    claimed_until DATETIME2(6)   NOT NULL,
    CONSTRAINT {{ident "jobs_inflight_pk"}} PRIMARY KEY CLUSTERED (id)
);
-- The rescue path: expired leases.
CREATE NONCLUSTERED INDEX {{ident "jobs_inflight_lease"}} ON {{table "jobs_inflight"}} (claimed_until);
ALTER TABLE {{table "jobs_inflight"}} SET (LOCK_ESCALATION = DISABLE);

-- dedupe_key is unique per queue among stored jobs, wherever they are: a
-- job's key is recorded here when it is enqueued and freed when it is
-- completed. Claims, retries, releases and rescues move the job between
-- jobs and jobs_inflight and never touch this table, so a claim never waits
-- on an enqueue, and a unique index can do what no index over two tables
-- can.
CREATE TABLE {{table "jobs_dedupe"}} (
    queue      VARCHAR(64)   COLLATE Latin1_General_BIN2 NOT NULL,
    dedupe_key NVARCHAR(200) COLLATE Latin1_General_100_BIN2 NOT NULL,
    id         BIGINT        NOT NULL,
    CONSTRAINT {{ident "jobs_dedupe_pk"}} PRIMARY KEY CLUSTERED (queue, dedupe_key)
);
ALTER TABLE {{table "jobs_dedupe"}} SET (LOCK_ESCALATION = DISABLE);

-- +goose Down
DROP TABLE {{table "jobs_dedupe"}};
DROP TABLE {{table "jobs_inflight"}};
DROP TABLE {{table "jobs"}};
DROP SEQUENCE {{table "jobs_id_seq"}};
