-- +goose Up
-- One row per queue that was ever paused or resumed; a queue with no row
-- runs. Claim probes it by primary key.
CREATE TABLE {{table "queues"}} (
    queue      TEXT    NOT NULL PRIMARY KEY,
    paused     INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- +goose Down
DROP TABLE {{table "queues"}};
