-- Counts each queue's jobs as stats.sql does, but each count stops at $1,
-- so the page that shows them reads about $1 index entries per queue and
-- state however many jobs are stored (stats.sql reads every row).
--
-- The queues are found by skipping through the claim and dead indexes (one
-- descent per queue, not a scan), plus the queues of claimed rows (the
-- lease index; as many as there are jobs in flight). held lists the ready
-- rows an advisory claimer holds (see stats.sql), found from pg_locks: the
-- lock key is the id folded to 32 bits, so each key is tried with every
-- high word the ids reach. Those rows count as held, not ready.
--
-- Ready reads the claim index forwards, where each priority's due rows
-- come first, and scheduled reads it backwards, where its future rows come
-- first. The oldest ready wait is exact: per priority (skipped through
-- the index), the first due row no one holds.
WITH RECURSIVE locks AS (
    SELECT DISTINCT l.classid, l.objid
    FROM pg_locks AS l
    WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
), held AS MATERIALIZED (
    SELECT j.id, j.queue
    FROM locks AS h
    CROSS JOIN generate_series(0, coalesce((SELECT max(id) FROM {{table "jobs"}}), 0) >> 32) AS k(hi)
    JOIN {{table "jobs"}} AS j ON j.id = (k.hi << 32) + h.objid::bigint AND j.tableoid = h.classid
    WHERE j.state = 'ready'
), ready_queues(queue) AS (
    (SELECT queue FROM {{table "jobs"}} WHERE state = 'ready' ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM {{table "jobs"}} AS j
            WHERE j.state = 'ready' AND j.queue > r.queue ORDER BY j.queue LIMIT 1)
    FROM ready_queues AS r WHERE r.queue IS NOT NULL
), dead_queues(queue) AS (
    (SELECT queue FROM {{table "jobs"}} WHERE state = 'dead' ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM {{table "jobs"}} AS j
            WHERE j.state = 'dead' AND j.queue > r.queue ORDER BY j.queue LIMIT 1)
    FROM dead_queues AS r WHERE r.queue IS NOT NULL
), names AS (
    SELECT queue FROM ready_queues WHERE queue IS NOT NULL
    UNION
    SELECT queue FROM dead_queues WHERE queue IS NOT NULL
    UNION
    SELECT queue FROM {{table "jobs"}} WHERE state = 'claimed'
)
SELECT n.queue,
       (SELECT count(*) FROM (
            SELECT 1 FROM {{table "jobs"}} AS j
            WHERE j.queue = n.queue AND j.state = 'ready' AND j.run_at <= now()
              AND NOT EXISTS (SELECT 1 FROM held AS h WHERE h.id = j.id)
            ORDER BY j.priority, j.run_at LIMIT $1) AS c) AS ready,
       (SELECT count(*) FROM (
            SELECT 1 FROM {{table "jobs"}} AS j
            WHERE j.queue = n.queue AND j.state = 'ready' AND j.run_at > now()
              AND NOT EXISTS (SELECT 1 FROM held AS h WHERE h.id = j.id)
            ORDER BY j.priority DESC, j.run_at DESC LIMIT $1) AS c) AS scheduled,
       least($1, (SELECT count(*) FROM (
            SELECT 1 FROM {{table "jobs"}} AS j
            WHERE j.queue = n.queue AND j.state = 'claimed' LIMIT $1) AS c)
         + (SELECT count(*) FROM held AS h WHERE h.queue = n.queue)) AS held,
       (SELECT count(*) FROM (
            SELECT 1 FROM {{table "jobs"}} AS j
            WHERE j.queue = n.queue AND j.state = 'dead' LIMIT $1) AS c) AS dead,
       CASE WHEN o.oldest <= now() THEN extract(epoch FROM now() - o.oldest) ELSE 0 END::float8 AS oldest_ready_age,
       EXISTS (SELECT 1 FROM {{table "queues"}} AS q WHERE q.queue = n.queue AND q.paused) AS paused
FROM names AS n
CROSS JOIN LATERAL (
    WITH RECURSIVE prio(priority) AS (
        (SELECT priority FROM {{table "jobs"}}
         WHERE queue = n.queue AND state = 'ready' ORDER BY priority LIMIT 1)
        UNION ALL
        SELECT (SELECT j.priority FROM {{table "jobs"}} AS j
                WHERE j.queue = n.queue AND j.state = 'ready' AND j.priority > p.priority
                ORDER BY j.priority LIMIT 1)
        FROM prio AS p WHERE p.priority IS NOT NULL
    )
    SELECT min((SELECT j.run_at FROM {{table "jobs"}} AS j
                WHERE j.queue = n.queue AND j.state = 'ready' AND j.priority = p.priority
                  AND NOT EXISTS (SELECT 1 FROM held AS h WHERE h.id = j.id)
                ORDER BY j.run_at LIMIT 1)) AS oldest
    FROM prio AS p WHERE p.priority IS NOT NULL
) AS o
ORDER BY n.queue
