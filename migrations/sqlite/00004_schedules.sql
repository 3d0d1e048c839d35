-- +goose Up
-- One row per recurring schedule (package schedule), kept current by the
-- schedulers. last_tick is the last tick a scheduler recorded: a scheduler
-- enqueues a tick's job only in the transaction whose conditional UPDATE
-- (last_tick < the tick) changed this row, so each tick makes one job
-- however many schedulers run. NULL: no tick recorded yet. Times are
-- integer microseconds since the Unix epoch (UTC).
CREATE TABLE {{table "schedules"}} (
    name       TEXT    NOT NULL PRIMARY KEY,
    spec       TEXT    NOT NULL,
    time_zone  TEXT    NOT NULL,
    queue      TEXT    NOT NULL,
    last_tick  INTEGER,
    next_tick  INTEGER,
    paused     INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- +goose Down
DROP TABLE {{table "schedules"}};
