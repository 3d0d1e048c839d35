-- Counts each queue's jobs as stats.sql does, but each count stops at ?1,
-- so it reads about ?1 index entries per queue and state however many
-- jobs are stored (stats.sql reads every row). The queues are found by
-- skipping through the claim and dead indexes (one descent per queue),
-- plus those of claimed rows. The claimed rows (the lease index: the jobs
-- in flight) are read once, counted per queue; a claimed job whose lease
-- has expired counts as ready, as in stats.sql.
--
-- prio skips through each queue's priorities in the claim index, one
-- descent each. Within a priority the index is in run_at order, so its
-- due rows are one range and its future rows the next: ready and
-- scheduled read, priority after priority (CROSS JOIN keeps prio the
-- outer loop), just that range, and the LIMIT stops the whole count once
-- ?1 rows are found, whatever the mix of due and future jobs. The oldest
-- ready wait is exact: the first run_at of each priority, the oldest of
-- those if it has passed.
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
), claimed(queue, expired, held) AS (
    SELECT j.queue, sum(j.claimed_until < n.now), sum(j.claimed_until >= n.now)
    FROM {{table "jobs"}} AS j, n
    WHERE j.state = 'claimed'
    GROUP BY j.queue
), names(queue) AS (
    SELECT queue FROM ready_queues WHERE queue IS NOT NULL
    UNION
    SELECT queue FROM dead_queues WHERE queue IS NOT NULL
    UNION
    SELECT queue FROM claimed
), prio(queue, priority) AS (
    SELECT r.queue, (SELECT j.priority FROM {{table "jobs"}} AS j
                     WHERE j.queue = r.queue AND j.state = 'ready' ORDER BY j.priority LIMIT 1)
    FROM ready_queues AS r WHERE r.queue IS NOT NULL
    UNION ALL
    SELECT p.queue, (SELECT j.priority FROM {{table "jobs"}} AS j
                     WHERE j.queue = p.queue AND j.state = 'ready' AND j.priority > p.priority
                     ORDER BY j.priority LIMIT 1)
    FROM prio AS p WHERE p.priority IS NOT NULL
), counts AS (
    SELECT nm.queue,
           (SELECT count(*) FROM (
                SELECT 1 FROM prio AS p CROSS JOIN {{table "jobs"}} AS j
                WHERE p.queue = nm.queue AND p.priority IS NOT NULL
                  AND j.queue = p.queue AND j.state = 'ready' AND j.priority = p.priority AND j.run_at <= n.now
                LIMIT ?1)) AS ready,
           (SELECT count(*) FROM (
                SELECT 1 FROM prio AS p CROSS JOIN {{table "jobs"}} AS j
                WHERE p.queue = nm.queue AND p.priority IS NOT NULL
                  AND j.queue = p.queue AND j.state = 'ready' AND j.priority = p.priority AND j.run_at > n.now
                LIMIT ?1)) AS scheduled,
           coalesce(c.expired, 0) AS expired,
           coalesce(c.held, 0) AS held,
           (SELECT count(*) FROM (
                SELECT 1 FROM {{table "jobs"}} AS j
                WHERE j.queue = nm.queue AND j.state = 'dead' LIMIT ?1)) AS dead,
           (SELECT min((SELECT j.run_at FROM {{table "jobs"}} AS j
                        WHERE j.queue = p.queue AND j.state = 'ready' AND j.priority = p.priority
                        ORDER BY j.run_at LIMIT 1))
            FROM prio AS p WHERE p.queue = nm.queue AND p.priority IS NOT NULL) AS oldest,
           n.now
    FROM names AS nm CROSS JOIN n LEFT JOIN claimed AS c ON c.queue = nm.queue
)
SELECT queue, min(?1, ready + expired), scheduled, min(?1, held), dead,
       CASE WHEN oldest <= now THEN (now - oldest) / 1e6 ELSE 0.0 END,
       COALESCE((SELECT p.paused FROM {{table "queues"}} AS p WHERE p.queue = counts.queue), 0)
FROM counts
ORDER BY queue
