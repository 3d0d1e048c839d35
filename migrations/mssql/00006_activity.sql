-- +goose Up
-- Worker activity (queue.Activity): what each worker process completed,
-- retried and made dead per queue, kind and minute. Completed jobs are
-- deleted, so this is the only history of throughput. A process adds to
-- its own rows alone (process is in the key), so no two processes ever
-- write the same row. The clustered key leads with minute: the dashboard
-- reads the last hour and the flusher prunes the oldest minutes, both one
-- range of it. Minutes are the writing process's clock, truncated, in
-- UTC. Names compare as binary strings, as in the jobs table.
CREATE TABLE {{table "activity"}} (
    minute    DATETIME2(0)  NOT NULL,
    queue     VARCHAR(64)   COLLATE Latin1_General_BIN2 NOT NULL,
    kind      NVARCHAR(100) COLLATE Latin1_General_100_BIN2 NOT NULL,
    process   VARCHAR(32)   COLLATE Latin1_General_BIN2 NOT NULL,
    completed BIGINT        NOT NULL,
    retried   BIGINT        NOT NULL,
    dead      BIGINT        NOT NULL,
    CONSTRAINT {{ident "activity_pk"}} PRIMARY KEY CLUSTERED (minute, queue, kind, process)
);

-- The processes running Workers: a row per process, touched on each
-- activity flush and deleted at a clean exit; one not seen for a while is
-- shown as gone, then pruned. queues is comma-separated queue names.
CREATE TABLE {{table "processes"}} (
    id          VARCHAR(32)    COLLATE Latin1_General_BIN2 NOT NULL,
    host        NVARCHAR(255)  NOT NULL,
    pid         BIGINT         NOT NULL,
    queues      VARCHAR(1000)  COLLATE Latin1_General_BIN2 NOT NULL,
    concurrency INT            NOT NULL,
    started_at  DATETIME2(6)   NOT NULL,
    seen_at     DATETIME2(6)   NOT NULL,
    CONSTRAINT {{ident "processes_pk"}} PRIMARY KEY CLUSTERED (id)
);

-- +goose Down
DROP TABLE {{table "processes"}};
DROP TABLE {{table "activity"}};
