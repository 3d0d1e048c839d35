-- +goose Up
-- Times are integer microseconds since the Unix epoch (UTC). AUTOINCREMENT
-- keeps ids from being reused after the newest job is deleted.
CREATE TABLE {{table "jobs"}} (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    queue         TEXT    NOT NULL,
    payload       BLOB    NOT NULL,
    priority      INTEGER NOT NULL DEFAULT 0,
    run_at        INTEGER NOT NULL,
    attempt       INTEGER NOT NULL DEFAULT 0,
    max_attempts  INTEGER NOT NULL DEFAULT 25,
    state         TEXT    NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'claimed', 'dead')),
    claim_token   INTEGER,
    claimed_until INTEGER,
    last_error    TEXT,
    dedupe_key    TEXT,
    created_at    INTEGER NOT NULL
);

CREATE INDEX {{ident "jobs_claim"}} ON {{table "jobs"}} (queue, priority, run_at, id) WHERE state = 'ready';
CREATE INDEX {{ident "jobs_lease"}} ON {{table "jobs"}} (claimed_until) WHERE state = 'claimed';
CREATE INDEX {{ident "jobs_dead"}} ON {{table "jobs"}} (queue, id) WHERE state = 'dead';
CREATE UNIQUE INDEX {{ident "jobs_dedupe"}} ON {{table "jobs"}} (queue, dedupe_key) WHERE dedupe_key IS NOT NULL;

-- +goose Down
DROP TABLE {{table "jobs"}};
