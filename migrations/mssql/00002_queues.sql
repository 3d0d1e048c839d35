-- +goose Up
-- One row per queue that was ever paused or resumed; a queue with no row
-- runs. The same type and collation as jobs.queue.
CREATE TABLE {{table "queues"}} (
    queue      VARCHAR(64)  COLLATE Latin1_General_BIN2 NOT NULL PRIMARY KEY,
    paused     BIT          NOT NULL DEFAULT 0,
    updated_at DATETIME2(6) NOT NULL DEFAULT SYSUTCDATETIME()
);

-- +goose Down
DROP TABLE {{table "queues"}};
