-- Counts each queue's jobs as stats.sql does, but each count stops at ?1,
-- so it reads about ?1 index entries per queue and state however many
-- jobs are stored (stats.sql reads every row). The queues are found by
-- skipping through the claim and dead indexes (one descent per queue),
-- plus those of claimed rows (the lease index: the jobs in flight). Ready
-- reads the claim index forwards, where each priority's due rows come
-- first, scheduled reads it backwards, where its future rows come first;
-- a claimed job whose lease has expired counts as ready, as in stats.sql.
-- The oldest ready wait is exact: the first run_at of each priority
-- (skipped through the index), the oldest of those if it has passed.
WITH RECURSIVE n(now) AS (SELECT CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000),
ready_queues(queue) AS (
    SELECT (SELECT queue FROM {{table "jobs"}} WHERE state = 'ready' ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM {{table "jobs"}} AS j
            WHERE j.state = 'ready' AND j.queue > r.queue ORDER BY j.queue LIMIT 1)
    FROM ready_queues AS r WHERE r.queue IS NOT NULL
), dead_queues(queue) AS (
    SELECT (SELECT queue FROM {{table "jobs"}} WHERE state = 'dead' ORDER BY queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM {{table "jobs"}} AS j
            WHERE j.state = 'dead' AND j.queue > r.queue ORDER BY j.queue LIMIT 1)
    FROM dead_queues AS r WHERE r.queue IS NOT NULL
), names(queue) AS (
    SELECT queue FROM ready_queues WHERE queue IS NOT NULL
    UNION
    SELECT queue FROM dead_queues WHERE queue IS NOT NULL
    UNION
    SELECT queue FROM {{table "jobs"}} WHERE state = 'claimed'
), counts AS (
    SELECT nm.queue,
           (SELECT count(*) FROM (
                SELECT 1 FROM {{table "jobs"}} AS j
                WHERE j.queue = nm.queue AND j.state = 'ready' AND j.run_at <= n.now
                ORDER BY j.priority, j.run_at LIMIT ?1)) AS ready,
           (SELECT count(*) FROM (
                SELECT 1 FROM {{table "jobs"}} AS j
                WHERE j.queue = nm.queue AND j.state = 'claimed' AND j.claimed_until < n.now LIMIT ?1)) AS expired,
           (SELECT count(*) FROM (
                SELECT 1 FROM {{table "jobs"}} AS j
                WHERE j.queue = nm.queue AND j.state = 'ready' AND j.run_at > n.now
                ORDER BY j.priority DESC, j.run_at DESC LIMIT ?1)) AS scheduled,
           (SELECT count(*) FROM (
                SELECT 1 FROM {{table "jobs"}} AS j
                WHERE j.queue = nm.queue AND j.state = 'claimed' AND j.claimed_until >= n.now LIMIT ?1)) AS held,
           (SELECT count(*) FROM (
                SELECT 1 FROM {{table "jobs"}} AS j
                WHERE j.queue = nm.queue AND j.state = 'dead' LIMIT ?1)) AS dead,
           (WITH RECURSIVE prio(priority) AS (
                SELECT (SELECT priority FROM {{table "jobs"}}
                        WHERE queue = nm.queue AND state = 'ready' ORDER BY priority LIMIT 1)
                UNION ALL
                SELECT (SELECT j.priority FROM {{table "jobs"}} AS j
                        WHERE j.queue = nm.queue AND j.state = 'ready' AND j.priority > p.priority
                        ORDER BY j.priority LIMIT 1)
                FROM prio AS p WHERE p.priority IS NOT NULL
            )
            SELECT min((SELECT j.run_at FROM {{table "jobs"}} AS j
                        WHERE j.queue = nm.queue AND j.state = 'ready' AND j.priority = p.priority
                        ORDER BY j.run_at LIMIT 1))
            FROM prio AS p WHERE p.priority IS NOT NULL) AS oldest,
           n.now
    FROM names AS nm, n
)
SELECT queue, min(?1, ready + expired), scheduled, held, dead,
       CASE WHEN oldest <= now THEN (now - oldest) / 1e6 ELSE 0.0 END,
       COALESCE((SELECT p.paused FROM {{table "queues"}} AS p WHERE p.queue = counts.queue), 0)
FROM counts
ORDER BY queue
