-- +goose Up
-- The kind of a job (issue #24): what it is, where queue says where it
-- waits; '' for a job without one, so a plain-SQL INSERT that names no
-- kind keeps working. ADD COLUMN with a constant default only rewrites the
-- table's schema text: existing rows are not touched and read the default.
-- No CHECK on its length (up to 100 bytes, validated by dbq as queue names
-- are): SQLite would scan every row to test it, and no other TEXT column
-- here carries one.
ALTER TABLE {{table "jobs"}} ADD COLUMN kind TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE {{table "jobs"}} DROP COLUMN kind;
