-- Counts each queue's jobs. A ready row with an advisory lock on its key
-- (namespace = the table's oid, key = id folded to int4; see
-- claim_advisory.sql) is held, like a claimed row. Paused comes from the
-- queues table, one primary-key probe per queue.
WITH held AS (
    SELECT DISTINCT l.classid, l.objid
    FROM pg_locks AS l
    WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
), jobs AS (
    SELECT j.queue, j.run_at,
           CASE WHEN j.state = 'ready' AND h.objid IS NOT NULL THEN 'held' ELSE j.state END AS state
    FROM {{table "jobs"}} AS j
    LEFT JOIN held AS h ON h.classid = j.tableoid AND h.objid = j.id::bit(32)::int4::oid
)
SELECT queue,
       count(*) FILTER (WHERE state = 'ready' AND run_at <= now()) AS ready,
       count(*) FILTER (WHERE state = 'ready' AND run_at > now()) AS scheduled,
       count(*) FILTER (WHERE state IN ('claimed', 'held')) AS held,
       count(*) FILTER (WHERE state = 'dead') AS dead,
       coalesce(extract(epoch FROM now() - min(run_at) FILTER (WHERE state = 'ready' AND run_at <= now())), 0)::float8 AS oldest_ready_age,
       EXISTS (SELECT 1 FROM {{table "queues"}} AS q WHERE q.queue = jobs.queue AND q.paused) AS paused
FROM jobs
GROUP BY queue
ORDER BY queue
