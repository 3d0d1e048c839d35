-- The queues with stored jobs, for CountQueues: found by skipping through
-- the claim and dead indexes (one descent per queue, not a scan), plus the
-- queues of claimed rows (the lease index: as many as there are jobs in
-- flight).
WITH RECURSIVE ready_queues(queue) AS (
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
)
SELECT queue FROM ready_queues WHERE queue IS NOT NULL
UNION
SELECT queue FROM dead_queues WHERE queue IS NOT NULL
UNION
SELECT queue FROM {{table "jobs"}} WHERE state = 'claimed'
ORDER BY queue
