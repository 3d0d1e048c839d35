-- What holds this database's MVCC horizon back, so that vacuum cannot
-- remove the dead rows of the jobs table (health.go): sessions with a
-- snapshot (backend_xmin) or a transaction id (backend_xid) in this
-- database, or in none (a WAL sender fed by a replica's
-- hot_standby_feedback without a slot), but not this statement's own;
-- replication slots, whose xmin holds every database back and whose
-- catalog_xmin holds back the system catalogs only; prepared transactions
-- of this database. Other roles' sessions show their xmin to every role,
-- but their state and xact_start only to one with pg_read_all_stats. At most 10 (queue.MaxHolders), the oldest in
-- transaction ids first.
WITH holders AS (
    SELECT 'session' AS kind, a.pid, '' AS name, coalesce(a.state, '') AS state,
           coalesce(a.application_name, '') AS application, coalesce(a.usename::text, '') AS usr,
           a.xact_start AS since, greatest(age(a.backend_xmin), age(a.backend_xid)) AS xid_age,
           false AS catalog_only
    FROM pg_stat_activity AS a
    WHERE a.pid <> pg_backend_pid()
      AND (a.backend_xmin IS NOT NULL OR a.backend_xid IS NOT NULL)
      AND (a.datid IS NULL OR a.datid = 0 OR a.datname = current_database())
    UNION ALL
    SELECT 'replication slot', 0, s.slot_name::text, CASE WHEN s.active THEN 'active' ELSE 'inactive' END,
           '', '', NULL, age(s.xmin), false
    FROM pg_replication_slots AS s
    WHERE s.xmin IS NOT NULL
    UNION ALL
    SELECT 'replication slot', 0, s.slot_name::text, CASE WHEN s.active THEN 'active' ELSE 'inactive' END,
           '', '', NULL, age(s.catalog_xmin), true
    FROM pg_replication_slots AS s
    WHERE s.catalog_xmin IS NOT NULL
    UNION ALL
    SELECT 'prepared transaction', 0, p.gid, '', '', p.owner::text, p.prepared, age(p.transaction), false
    FROM pg_prepared_xacts AS p
    WHERE p.database = current_database()
)
SELECT kind, pid, name, state, application, usr, since,
       greatest(coalesce(extract(epoch FROM clock_timestamp() - since), 0), 0)::float8 AS age_seconds,
       xid_age::int8, catalog_only
FROM holders
ORDER BY xid_age DESC, since
LIMIT 10
