-- +goose Up
-- One row per queue that was ever paused or resumed; a queue with no row
-- runs. Claim probes it by primary key.
CREATE TABLE {{table "queues"}} (
    queue      varchar(64) NOT NULL PRIMARY KEY,
    paused     boolean     NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE {{table "queues"}};
