-- The queues with stored jobs, for CountQueues, each with its number of
-- claimed rows: the queues of ready and dead rows are found by skipping
-- through the claim and dead indexes (one descent per queue, not a scan);
-- the claimed rows are read once here (the lease index: as many as there
-- are jobs in flight), counted per queue, rather than once per queue by
-- count_queue.sql.
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
), claimed(queue, n) AS (
    SELECT queue, count(*) FROM {{table "jobs"}} WHERE state = 'claimed' GROUP BY queue
)
SELECT q.queue, coalesce(c.n, 0)
FROM (SELECT queue FROM ready_queues WHERE queue IS NOT NULL
      UNION
      SELECT queue FROM dead_queues WHERE queue IS NOT NULL
      UNION
      SELECT queue FROM claimed) AS q
LEFT JOIN claimed AS c ON c.queue = q.queue
ORDER BY q.queue
