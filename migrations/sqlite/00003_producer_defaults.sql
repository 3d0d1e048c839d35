-- +goose Up
-- The producer contract (README, "Producers in other languages"): an
-- INSERT INTO jobs (queue, payload) alone must fill every other column.
-- run_at and created_at (integer microseconds since the Unix epoch, UTC)
-- get the current time as their default, to the millisecond, in a form
-- every SQLite version evaluates ('now' is one instant within a
-- statement).
--
-- SQLite cannot change a column's default in place, so this is its
-- standard table rebuild: create the new table, copy the rows, drop the
-- old one, rename, recreate the indexes exactly as 00001 made them. The
-- AUTOINCREMENT counter is carried over, so no id is ever reused. goose
-- runs the migration in one transaction.
CREATE TABLE {{table "jobs_rebuild"}} (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    queue         TEXT    NOT NULL,
    payload       BLOB    NOT NULL,
    priority      INTEGER NOT NULL DEFAULT 0,
    run_at        INTEGER NOT NULL DEFAULT (CAST(strftime('%s', 'now') AS INTEGER) * 1000000 + CAST(substr(strftime('%f', 'now'), 4) AS INTEGER) * 1000),
    attempt       INTEGER NOT NULL DEFAULT 0,
    max_attempts  INTEGER NOT NULL DEFAULT 25,
    state         TEXT    NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'claimed', 'dead')),
    claim_token   INTEGER,
    claimed_until INTEGER,
    last_error    TEXT,
    dedupe_key    TEXT,
    created_at    INTEGER NOT NULL DEFAULT (CAST(strftime('%s', 'now') AS INTEGER) * 1000000 + CAST(substr(strftime('%f', 'now'), 4) AS INTEGER) * 1000)
);
INSERT INTO {{table "jobs_rebuild"}} (id, queue, payload, priority, run_at, attempt, max_attempts, state,
    claim_token, claimed_until, last_error, dedupe_key, created_at)
SELECT id, queue, payload, priority, run_at, attempt, max_attempts, state,
    claim_token, claimed_until, last_error, dedupe_key, created_at FROM {{table "jobs"}};
DELETE FROM sqlite_sequence WHERE name = '{{prefix}}jobs_rebuild';
INSERT INTO sqlite_sequence (name, seq) SELECT '{{prefix}}jobs_rebuild', seq FROM sqlite_sequence WHERE name = '{{prefix}}jobs';
DROP TABLE {{table "jobs"}};
ALTER TABLE {{table "jobs_rebuild"}} RENAME TO {{ident "jobs"}};
CREATE INDEX {{ident "jobs_claim"}} ON {{table "jobs"}} (queue, priority, run_at, id) WHERE state = 'ready';
CREATE INDEX {{ident "jobs_lease"}} ON {{table "jobs"}} (claimed_until) WHERE state = 'claimed';
CREATE INDEX {{ident "jobs_dead"}} ON {{table "jobs"}} (queue, id) WHERE state = 'dead';
CREATE UNIQUE INDEX {{ident "jobs_dedupe"}} ON {{table "jobs"}} (queue, dedupe_key) WHERE dedupe_key IS NOT NULL;

-- +goose Down
-- The same rebuild back to 00001's table, without the two defaults.
CREATE TABLE {{table "jobs_rebuild"}} (
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
INSERT INTO {{table "jobs_rebuild"}} (id, queue, payload, priority, run_at, attempt, max_attempts, state,
    claim_token, claimed_until, last_error, dedupe_key, created_at)
SELECT id, queue, payload, priority, run_at, attempt, max_attempts, state,
    claim_token, claimed_until, last_error, dedupe_key, created_at FROM {{table "jobs"}};
DELETE FROM sqlite_sequence WHERE name = '{{prefix}}jobs_rebuild';
INSERT INTO sqlite_sequence (name, seq) SELECT '{{prefix}}jobs_rebuild', seq FROM sqlite_sequence WHERE name = '{{prefix}}jobs';
DROP TABLE {{table "jobs"}};
ALTER TABLE {{table "jobs_rebuild"}} RENAME TO {{ident "jobs"}};
CREATE INDEX {{ident "jobs_claim"}} ON {{table "jobs"}} (queue, priority, run_at, id) WHERE state = 'ready';
CREATE INDEX {{ident "jobs_lease"}} ON {{table "jobs"}} (claimed_until) WHERE state = 'claimed';
CREATE INDEX {{ident "jobs_dead"}} ON {{table "jobs"}} (queue, id) WHERE state = 'dead';
CREATE UNIQUE INDEX {{ident "jobs_dedupe"}} ON {{table "jobs"}} (queue, dedupe_key) WHERE dedupe_key IS NOT NULL;
