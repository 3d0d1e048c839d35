-- +goose Up
-- What a job is (queue.Job.Kind); '' for a job enqueued without one, so an
-- INSERT that names no kind (an older producer, plain SQL) still works.
-- Cheap on a big table: since PostgreSQL 11, ADD COLUMN with a constant
-- default only records the default in the catalog — no table rewrite, and
-- the ACCESS EXCLUSIVE lock lasts as long as that. varchar(100) counts
-- characters; the CHECK holds a kind to queue.MaxKindLen bytes, as the
-- other dialects' columns do, whoever inserts it. It is NOT VALID so that
-- adding it scans no row: every existing row has kind '', and every row
-- inserted or updated from now on is checked.
ALTER TABLE {{table "jobs"}}
    ADD COLUMN kind varchar(100) NOT NULL DEFAULT '',
    ADD CONSTRAINT {{ident "jobs_kind_check"}} CHECK (octet_length(kind) <= 100) NOT VALID;

-- +goose Down
ALTER TABLE {{table "jobs"}} DROP COLUMN kind;
