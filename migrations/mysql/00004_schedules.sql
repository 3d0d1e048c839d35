-- +goose Up
-- One row per recurring schedule (package schedule), kept current by the
-- schedulers. last_tick is the last tick a scheduler recorded: a scheduler
-- enqueues a tick's job only in the transaction whose conditional UPDATE
-- (last_tick < the tick) changed this row, so each tick makes one job
-- however many schedulers run. NULL: no tick recorded yet. Names compare
-- byte for byte, as queue names do; times are UTC.
CREATE TABLE {{table "schedules"}} (
    name       VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    spec       VARCHAR(200) NOT NULL,
    time_zone  VARCHAR(64)  NOT NULL,
    queue      VARCHAR(64)  CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    last_tick  DATETIME(6)  NULL,
    next_tick  DATETIME(6)  NULL,
    paused     BOOLEAN      NOT NULL DEFAULT FALSE,
    updated_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE {{table "schedules"}};
