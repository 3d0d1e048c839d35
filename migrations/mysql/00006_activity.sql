-- +goose Up
-- Worker activity (queue.Activity): what each worker process completed,
-- retried and made dead per queue, kind and minute. Completed jobs are
-- deleted, so this is the only history of throughput. A process adds to
-- its own rows alone (process is in the key), so no two processes ever
-- write the same row. The key leads with minute: the dashboard reads the
-- last hour and the flusher prunes the oldest minutes, both one range of
-- it. Minutes are the writing process's clock, truncated, in UTC. Names
-- compare byte for byte, as queue names and kinds do in the jobs table.
CREATE TABLE {{table "activity"}} (
    minute    DATETIME        NOT NULL,
    queue     VARCHAR(64)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    kind      VARBINARY(100)  NOT NULL DEFAULT '',
    process   VARCHAR(32)     CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    completed BIGINT          NOT NULL DEFAULT 0,
    retried   BIGINT          NOT NULL DEFAULT 0,
    dead      BIGINT          NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue, kind, process)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The processes running Workers: a row per process, touched on each
-- activity flush and deleted at a clean exit; one not seen for a while is
-- shown as gone, then pruned. queues is comma-separated queue names.
CREATE TABLE {{table "processes"}} (
    id          VARCHAR(32)   CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    host        VARCHAR(255)  NOT NULL,
    pid         BIGINT        NOT NULL,
    queues      VARCHAR(1000) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '',
    concurrency INT           NOT NULL DEFAULT 0,
    started_at  DATETIME(6)   NOT NULL,
    seen_at     DATETIME(6)   NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE {{table "processes"}};
DROP TABLE {{table "activity"}};
