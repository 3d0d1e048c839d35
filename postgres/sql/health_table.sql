-- The jobs table's row estimates and upkeep from the statistics system
-- (health.go), with the server's clock and whether this role sees every
-- session's state and xact_start in pg_stat_activity (pg_read_all_stats, part of
-- pg_monitor; superusers have it). One row even before the table has
-- statistics; a missing table fails the regclass cast.
SELECT clock_timestamp(), pg_has_role('pg_read_all_stats', 'USAGE'),
       coalesce(t.n_live_tup, 0), coalesce(t.n_dead_tup, 0),
       t.last_autovacuum, t.last_autoanalyze, t.last_vacuum, t.last_analyze
FROM (SELECT 1) AS one
LEFT JOIN pg_stat_user_tables AS t ON t.relid = '{{table "jobs"}}'::regclass
