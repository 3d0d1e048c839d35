-- +goose Up
-- The producer contract (README, "Producers in other languages"): an
-- INSERT INTO jobs (queue, payload) alone must fill every other column,
-- with times in UTC as the dialect reads them. Expression defaults need
-- MySQL 8.0.13+ or MariaDB 10.2+ (dbq needs 8.0 / 10.6 anyway). Changing a
-- default only changes the table's metadata: no rows are rewritten.
--
-- TiDB refuses time functions in default expressions (error 3770), so on
-- TiDB (dbq's migrations find it from VERSION(); `dbq migrate sql` renders
-- MySQL's text) this migration changes nothing, and a producer there sets
-- run_at and created_at (UTC) itself.
{{if not tidb -}}
ALTER TABLE {{table "jobs"}}
    ALTER COLUMN run_at SET DEFAULT (UTC_TIMESTAMP(6)),
    ALTER COLUMN created_at SET DEFAULT (UTC_TIMESTAMP(6));
-- CURRENT_TIMESTAMP is the session's time zone; the dialect writes UTC.
ALTER TABLE {{table "queues"}}
    ALTER COLUMN updated_at SET DEFAULT (UTC_TIMESTAMP(6));
{{- end}}

-- +goose Down
{{if not tidb -}}
ALTER TABLE {{table "queues"}}
    ALTER COLUMN updated_at SET DEFAULT CURRENT_TIMESTAMP(6);
ALTER TABLE {{table "jobs"}}
    ALTER COLUMN run_at DROP DEFAULT,
    ALTER COLUMN created_at DROP DEFAULT;
{{- end}}
