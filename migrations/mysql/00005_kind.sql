-- +goose Up
-- The kind of a job (issue #24): what it is, where queue says where it
-- waits; '' for a job without one, so a plain-SQL INSERT that names no kind
-- keeps working. Bytes, compared bytewise like dedupe_key: VARBINARY(100)
-- is exactly dbq's limit of 100 bytes, and equality, GROUP BY and ORDER BY
-- are Go's (a utf8mb4 column would pad trailing spaces in comparisons,
-- count characters rather than bytes, and refuse bytes that are not UTF-8).
--
-- No ALGORITHM clause: MySQL 8.0.12+ and MariaDB 10.3+ add a last column
-- with a constant default INSTANT when they can (only the table's metadata
-- changes; existing rows read the default), and where they cannot (a
-- COMPRESSED table, MySQL's limit of 64 instant row versions) fall back to
-- an online rebuild instead of failing the migration. TiDB adds it as a
-- metadata change as well. No index: the kind is filtered and counted by
-- admin reads, and an index would cost every enqueue and claim.
ALTER TABLE {{table "jobs"}}
    ADD COLUMN kind VARBINARY(100) NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE {{table "jobs"}}
    DROP COLUMN kind;
