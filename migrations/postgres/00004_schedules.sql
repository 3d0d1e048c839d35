-- +goose Up
-- One row per recurring schedule (package schedule), kept current by the
-- schedulers. last_tick is the last tick a scheduler recorded: a scheduler
-- enqueues a tick's job only in the transaction whose conditional UPDATE
-- (last_tick < the tick) changed this row, so each tick makes one job
-- however many schedulers run. NULL: no tick recorded yet.
CREATE TABLE {{table "schedules"}} (
    name       varchar(64)  NOT NULL PRIMARY KEY,
    spec       varchar(200) NOT NULL,
    time_zone  varchar(64)  NOT NULL,
    queue      varchar(64)  NOT NULL,
    last_tick  timestamptz,
    next_tick  timestamptz,
    paused     boolean      NOT NULL DEFAULT false,
    updated_at timestamptz  NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE {{table "schedules"}};
