-- The advisory-lock namespace of the jobs table: its oid as int4, the
-- same value as tableoid::int4 in claim_advisory.sql. NULL when the table
-- does not exist. $1 is the quoted, qualified table name.
SELECT pg_backend_pid(), to_regclass($1)::oid::int4
