-- +goose Up
-- One row per recurring schedule (package schedule), kept current by the
-- schedulers. last_tick is the last tick a scheduler recorded: a scheduler
-- enqueues a tick's job only in the transaction whose conditional UPDATE
-- (last_tick < the tick) changed this row, so each tick makes one job
-- however many schedulers run. NULL: no tick recorded yet. Names compare
-- as binary strings, as queue names do; times are UTC.
CREATE TABLE {{table "schedules"}} (
    name       VARCHAR(64)   COLLATE Latin1_General_BIN2 NOT NULL,
    spec       NVARCHAR(200) NOT NULL,
    time_zone  VARCHAR(64)   NOT NULL,
    queue      VARCHAR(64)   COLLATE Latin1_General_BIN2 NOT NULL,
    last_tick  DATETIME2(6)  NULL,
    next_tick  DATETIME2(6)  NULL,
    paused     BIT           NOT NULL CONSTRAINT {{ident "schedules_paused_default"}} DEFAULT 0,
    updated_at DATETIME2(6)  NOT NULL CONSTRAINT {{ident "schedules_updated_at_default"}} DEFAULT SYSUTCDATETIME(),
    CONSTRAINT {{ident "schedules_pk"}} PRIMARY KEY CLUSTERED (name)
);

-- +goose Down
DROP TABLE {{table "schedules"}};
