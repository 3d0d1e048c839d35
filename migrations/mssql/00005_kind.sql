-- +goose Up
-- kind names what a job is (queue.Job.Kind); '' for a job with none, so a
-- producer's INSERT that names no kind still works. Both tables hold a
-- job's columns, so both get it: every statement that moves a row between
-- them carries it. NVARCHAR, as dedupe_key, so that any kind of at most
-- 100 UTF-8 bytes fits (each byte is at most one UTF-16 code unit) and
-- comes back as it was sent; compared as a binary string, as queue names
-- are.
--
-- A NOT NULL column with a constant default is added as a metadata-only
-- change on SQL Server 2012 and later Enterprise edition and on Azure SQL:
-- existing rows read the default from the catalog, nothing is rewritten.
-- Other editions write the default into every row, which takes a schema
-- modification lock for as long as that takes on a large jobs table.
ALTER TABLE {{table "jobs"}}
    ADD kind NVARCHAR(100) COLLATE Latin1_General_100_BIN2 NOT NULL
        CONSTRAINT {{ident "jobs_kind_default"}} DEFAULT N'';
ALTER TABLE {{table "jobs_inflight"}}
    ADD kind NVARCHAR(100) COLLATE Latin1_General_100_BIN2 NOT NULL
        CONSTRAINT {{ident "jobs_inflight_kind_default"}} DEFAULT N'';

-- +goose Down
-- A column with a default constraint drops after it.
ALTER TABLE {{table "jobs_inflight"}} DROP CONSTRAINT IF EXISTS {{ident "jobs_inflight_kind_default"}};
ALTER TABLE {{table "jobs_inflight"}} DROP COLUMN kind;
ALTER TABLE {{table "jobs"}} DROP CONSTRAINT IF EXISTS {{ident "jobs_kind_default"}};
ALTER TABLE {{table "jobs"}} DROP COLUMN kind;
