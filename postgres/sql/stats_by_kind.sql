-- Counts each queue's jobs per kind ('' for jobs enqueued without one),
-- with the states of stats.sql: a ready row with an advisory lock on its
-- key (see claim_advisory.sql) is held, like a claimed row, whatever its
-- run_at. Ordered byte for byte (COLLATE "C"), as Go sorts strings.
WITH held AS (
    SELECT DISTINCT l.classid, l.objid
    FROM pg_locks AS l
    WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
)
SELECT j.queue, j.kind,
       count(*) FILTER (WHERE j.state = 'ready' AND h.objid IS NULL AND j.run_at <= now()) AS ready,
       count(*) FILTER (WHERE j.state = 'ready' AND h.objid IS NULL AND j.run_at > now()) AS scheduled,
       count(*) FILTER (WHERE j.state = 'claimed' OR j.state = 'ready' AND h.objid IS NOT NULL) AS held,
       count(*) FILTER (WHERE j.state = 'dead') AS dead
FROM {{table "jobs"}} AS j
LEFT JOIN held AS h ON h.classid = j.tableoid AND h.objid = j.id::bit(32)::int4::oid
GROUP BY j.queue, j.kind
ORDER BY j.queue COLLATE "C", j.kind COLLATE "C"
