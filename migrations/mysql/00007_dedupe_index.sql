-- +goose Up
-- The dedupe index without one key shared by every job that has no dedupe
-- key. UNIQUE (queue, dedupe_key) holds (queue, NULL) for each such job.
-- InnoDB lets those repeat, but a Galera cluster (MariaDB Galera Cluster,
-- Percona XtraDB Cluster) certifies a write set on every unique key of its
-- rows whose parts are not all NULL: (queue, NULL) was one certification
-- key for all of a queue's jobs without a dedupe key, so any two claims or
-- completions of one queue on different nodes at the same time conflicted,
-- whatever rows they touched.
--
-- dedupe_queue is the job's queue when it has a dedupe key and NULL when
-- it has none, and the unique key is (dedupe_key, dedupe_queue): wholly
-- NULL for a job without a dedupe key, which Galera then does not certify
-- on. What it enforces is what the old key did: a dedupe key is unique
-- within its queue, and jobs without one are unconstrained. dedupe_key
-- leads, so a look-up by queue and dedupe key (the move import's) is a
-- range of this index as it was of the old one.
--
-- The column is VIRTUAL: adding it changes only the table's metadata (a
-- STORED one would rebuild the table, and TiDB adds none to an existing
-- table), and its values are kept in the index alone. No statement writes
-- or reads it: the server computes it from dedupe_key and queue. Building
-- the index reads the whole table, without blocking writes on MySQL and
-- MariaDB (online DDL); on Galera every DDL runs in total order isolation,
-- which holds the cluster's writes to the table until it is done. The new
-- index is built before the old one goes, so a dedupe key stays unique
-- throughout, and takes the old one's name.
ALTER TABLE {{table "jobs"}}
    ADD COLUMN dedupe_queue VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin
        AS (IF(dedupe_key IS NULL, NULL, queue)) VIRTUAL;
ALTER TABLE {{table "jobs"}}
    ADD UNIQUE KEY {{ident "jobs_dedupe_new"}} (dedupe_key, dedupe_queue);
ALTER TABLE {{table "jobs"}}
    DROP INDEX {{ident "jobs_dedupe"}};
ALTER TABLE {{table "jobs"}}
    RENAME INDEX {{ident "jobs_dedupe_new"}} TO {{ident "jobs_dedupe"}};

-- +goose Down
ALTER TABLE {{table "jobs"}}
    ADD UNIQUE KEY {{ident "jobs_dedupe_old"}} (queue, dedupe_key);
ALTER TABLE {{table "jobs"}}
    DROP INDEX {{ident "jobs_dedupe"}};
ALTER TABLE {{table "jobs"}}
    RENAME INDEX {{ident "jobs_dedupe_old"}} TO {{ident "jobs_dedupe"}};
ALTER TABLE {{table "jobs"}}
    DROP COLUMN dedupe_queue;
