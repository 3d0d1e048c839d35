-- +goose Up
-- Worker activity (queue.Activity): what each worker process completed,
-- retried and made dead per queue, kind and minute. Completed jobs are
-- deleted, so this is the only history of throughput. A process adds to
-- its own rows alone (process is in the key). The key leads with minute:
-- the dashboard reads the last hour and the flusher prunes the oldest
-- minutes, both one range of it. Times are integer microseconds since the
-- Unix epoch (UTC), minutes truncated, on the writing process's clock.
CREATE TABLE {{table "activity"}} (
    minute    INTEGER NOT NULL,
    queue     TEXT    NOT NULL,
    kind      TEXT    NOT NULL DEFAULT '',
    process   TEXT    NOT NULL,
    completed INTEGER NOT NULL DEFAULT 0,
    retried   INTEGER NOT NULL DEFAULT 0,
    dead      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue, kind, process)
) WITHOUT ROWID;

-- The processes running Workers: a row per process, touched on each
-- activity flush and deleted at a clean exit; one not seen for a while is
-- shown as gone, then pruned. queues is comma-separated queue names.
CREATE TABLE {{table "processes"}} (
    id          TEXT    NOT NULL PRIMARY KEY,
    host        TEXT    NOT NULL,
    pid         INTEGER NOT NULL,
    queues      TEXT    NOT NULL DEFAULT '',
    concurrency INTEGER NOT NULL DEFAULT 0,
    started_at  INTEGER NOT NULL,
    seen_at     INTEGER NOT NULL
) WITHOUT ROWID;

-- +goose Down
DROP TABLE {{table "processes"}};
DROP TABLE {{table "activity"}};
