-- +goose Up
-- Worker activity (queue.Activity): what each worker process completed,
-- retried and made dead per queue, kind and minute. Completed jobs are
-- deleted, so this is the only history of throughput. A process adds to
-- its own rows alone (process is in the key), so no two processes ever
-- write the same row. The key leads with minute: the dashboard reads the
-- last hour and the flusher prunes the oldest minutes, both one range of
-- it. Minutes are the writing process's clock, truncated, in UTC.
CREATE TABLE {{table "activity"}} (
    minute    timestamptz  NOT NULL,
    queue     varchar(64)  NOT NULL,
    kind      varchar(100) NOT NULL DEFAULT '',
    process   varchar(32)  NOT NULL,
    completed bigint       NOT NULL DEFAULT 0,
    retried   bigint       NOT NULL DEFAULT 0,
    dead      bigint       NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue, kind, process)
);

-- The processes running Workers: a row per process, touched on each
-- activity flush and deleted at a clean exit; one not seen for a while is
-- shown as gone, then pruned. queues is comma-separated.
CREATE TABLE {{table "processes"}} (
    id          varchar(32)   NOT NULL PRIMARY KEY,
    host        varchar(255)  NOT NULL,
    pid         bigint        NOT NULL,
    queues      varchar(1000) NOT NULL DEFAULT '',
    concurrency integer       NOT NULL DEFAULT 0,
    started_at  timestamptz   NOT NULL,
    seen_at     timestamptz   NOT NULL
);

-- +goose Down
DROP TABLE {{table "processes"}};
DROP TABLE {{table "activity"}};
