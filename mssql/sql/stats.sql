-- stats: per queue, ready (run_at passed), scheduled (run_at ahead), held
-- (in jobs_inflight, whichever strategy claimed them) and dead jobs, the
-- age in microseconds of the oldest ready job, and whether the queue is
-- paused (one primary-key probe of queues per queue).
SELECT s.queue,
       SUM(s.ready), SUM(s.scheduled), SUM(s.held), SUM(s.dead),
       COALESCE(DATEDIFF_BIG(microsecond, MIN(s.oldest), SYSUTCDATETIME()), 0),
       CAST(CASE WHEN EXISTS (SELECT 1 FROM {{table "queues"}} AS p
                              WHERE p.queue = s.queue AND p.paused = 1)
                 THEN 1 ELSE 0 END AS BIT)
FROM (
    SELECT queue,
           COUNT_BIG(CASE WHEN state = 'ready' AND run_at <= SYSUTCDATETIME() THEN 1 END) AS ready,
           COUNT_BIG(CASE WHEN state = 'ready' AND run_at > SYSUTCDATETIME() THEN 1 END) AS scheduled,
           CAST(0 AS BIGINT) AS held,
           COUNT_BIG(CASE WHEN state = 'dead' THEN 1 END) AS dead,
           MIN(CASE WHEN state = 'ready' AND run_at <= SYSUTCDATETIME() THEN run_at END) AS oldest
    FROM {{table "jobs"}}
    GROUP BY queue
    UNION ALL
    SELECT queue, 0, 0, COUNT_BIG(*), 0, NULL
    FROM {{table "jobs_inflight"}}
    GROUP BY queue
) AS s
GROUP BY s.queue
ORDER BY s.queue;
