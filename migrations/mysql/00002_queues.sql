-- +goose Up
-- One row per queue that was ever paused or resumed; a queue with no row
-- runs. The same type and collation as jobs.queue, so a probe by primary
-- key compares names byte for byte.
CREATE TABLE {{table "queues"}} (
    queue      VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    paused     BOOLEAN     NOT NULL DEFAULT FALSE,
    updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE = InnoDB;

-- +goose Down
DROP TABLE {{table "queues"}};
