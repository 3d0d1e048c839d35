-- The queues with stored jobs, for CountQueues, with the priorities of
-- each queue's ready jobs, which count_queue.sql takes: a loose scan of
-- the claim index (one dive per queue, state and priority: "Using index
-- for group-by"), not a read of the jobs. A row per queue, state and
-- priority; the caller keeps the priorities of state 'ready'.
SELECT queue, state, priority
FROM {{table "jobs"}} FORCE INDEX ({{ident "jobs_claim"}})
GROUP BY queue, state, priority
