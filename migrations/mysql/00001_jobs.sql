-- +goose Up
-- Times are UTC: the dialect writes UTC_TIMESTAMP(6) and reads with loc=UTC.
CREATE TABLE {{table "jobs"}} (
    id            BIGINT       NOT NULL AUTO_INCREMENT,
    queue         VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    payload       LONGBLOB     NOT NULL,
    priority      SMALLINT     NOT NULL DEFAULT 0,
    run_at        DATETIME(6)  NOT NULL,
    attempt       INT          NOT NULL DEFAULT 0,
    max_attempts  INT          NOT NULL DEFAULT 25,
    state         VARCHAR(8)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'ready',
    claim_token   BIGINT       NULL,
    claimed_until DATETIME(6)  NULL,
    last_error    TEXT         NULL,
    dedupe_key    VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
    created_at    DATETIME(6)  NOT NULL,
    PRIMARY KEY (id),
    KEY {{ident "jobs_claim"}} (queue, state, priority, run_at, id),
    KEY {{ident "jobs_lease"}} (state, claimed_until),
    UNIQUE KEY {{ident "jobs_dedupe"}} (queue, dedupe_key)
) ENGINE = InnoDB;

-- +goose Down
DROP TABLE {{table "jobs"}};
