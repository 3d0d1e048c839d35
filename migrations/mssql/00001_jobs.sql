-- +goose Up
-- Ready and dead jobs live in jobs, clustered in claim order; a claim moves
-- rows into jobs_inflight with DELETE ... OUTPUT INTO, and ack deletes them
-- from there. Times are UTC (SYSUTCDATETIME()).
CREATE TABLE {{table "jobs"}} (
    id            BIGINT         NOT NULL IDENTITY(1, 1),
    queue         VARCHAR(64)    NOT NULL,
    payload       VARBINARY(MAX) NOT NULL,
    priority      SMALLINT       NOT NULL DEFAULT 0,
    run_at        DATETIME2(6)   NOT NULL,
    attempt       INT            NOT NULL DEFAULT 0,
    max_attempts  INT            NOT NULL DEFAULT 25,
    state         VARCHAR(8)     NOT NULL DEFAULT 'ready',
    last_error    NVARCHAR(4000) NULL,
    dedupe_key    NVARCHAR(200)  NULL,
    created_at    DATETIME2(6)   NOT NULL,
    CONSTRAINT {{ident "jobs_pk"}} PRIMARY KEY CLUSTERED (queue, state, priority, run_at, id)
);
ALTER TABLE {{table "jobs"}} SET (LOCK_ESCALATION = DISABLE);
CREATE UNIQUE NONCLUSTERED INDEX {{ident "jobs_id"}} ON {{table "jobs"}} (id);

CREATE TABLE {{table "jobs_inflight"}} (
    id            BIGINT         NOT NULL,
    queue         VARCHAR(64)    NOT NULL,
    payload       VARBINARY(MAX) NOT NULL,
    priority      SMALLINT       NOT NULL,
    run_at        DATETIME2(6)   NOT NULL,
    attempt       INT            NOT NULL,
    max_attempts  INT            NOT NULL,
    last_error    NVARCHAR(4000) NULL,
    dedupe_key    NVARCHAR(200)  NULL,
    created_at    DATETIME2(6)   NOT NULL,
    claim_token   BIGINT         NOT NULL,
    claimed_until DATETIME2(6)   NOT NULL,
    CONSTRAINT {{ident "jobs_inflight_pk"}} PRIMARY KEY CLUSTERED (id)
);
ALTER TABLE {{table "jobs_inflight"}} SET (LOCK_ESCALATION = DISABLE);
CREATE NONCLUSTERED INDEX {{ident "jobs_inflight_lease"}} ON {{table "jobs_inflight"}} (claimed_until);

-- +goose Down
DROP TABLE {{table "jobs_inflight"}};
DROP TABLE {{table "jobs"}};
