-- +goose Up
-- MySQL 8.0+ and MariaDB 10.6+. Times are UTC: the dialect writes
-- UTC_TIMESTAMP(6) and reads DATETIME values as UTC wall clock, whatever the
-- session time zone or the driver's loc. No column has an expression
-- default, so MySQL before 8.0.13 takes the file too.
CREATE TABLE {{table "jobs"}} (
    id            BIGINT         NOT NULL AUTO_INCREMENT,
    queue         VARCHAR(64)    CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    payload       LONGBLOB       NOT NULL,
    priority      SMALLINT       NOT NULL DEFAULT 0,
    run_at        DATETIME(6)    NOT NULL,
    attempt       INT            NOT NULL DEFAULT 0,
    max_attempts  INT            NOT NULL DEFAULT 25,
    state         VARCHAR(8)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'ready',
    claim_token   BIGINT         NULL,
    claimed_until DATETIME(6)    NULL,
    last_error    TEXT           NULL,
    -- Bytes, compared bytewise: any key of up to 200 bytes is stored as given.
    dedupe_key    VARBINARY(200) NULL,
    created_at    DATETIME(6)    NOT NULL,
    PRIMARY KEY (id),
    -- The claim path: queue and state by equality, then claim order, so the
    -- candidate select is an index range scan that stops at its LIMIT.
    -- MySQL has no partial indexes; state in the key keeps held and dead
    -- rows out of the range. The same index serves the rescue of expired
    -- leases (queue, 'claimed': the jobs in flight) and Stats. There is no
    -- index on claimed_until: every claim and completion would have to
    -- move an entry at its hot right edge, for a rescue that runs a few
    -- times a lease (measured: 8-15% of the server's CPU per job).
    KEY {{ident "jobs_claim"}} (queue, state, priority, run_at, id),
    -- NULL keys never collide, so jobs without a key are unconstrained.
    UNIQUE KEY {{ident "jobs_dedupe"}} (queue, dedupe_key),
    CONSTRAINT {{ident "jobs_state_check"}} CHECK (state IN ('ready', 'claimed', 'dead'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE {{table "jobs"}};
