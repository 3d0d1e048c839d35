-- stats_by_kind: per queue and kind, ready (run_at passed), scheduled
-- (run_at ahead), held (in jobs_inflight, whichever strategy claimed them)
-- and dead jobs, as stats.sql counts them per queue; a job with no kind
-- counts under kind ''. Only (queue, kind) pairs that hold a job are
-- listed, so the rows are bounded by the kinds in use. Ordered by queue,
-- then kind.
SELECT s.queue, s.kind, SUM(s.ready), SUM(s.scheduled), SUM(s.held), SUM(s.dead)
FROM (
    SELECT queue, kind,
           COUNT_BIG(CASE WHEN state = 'ready' AND run_at <= SYSUTCDATETIME() THEN 1 END) AS ready,
           COUNT_BIG(CASE WHEN state = 'ready' AND run_at > SYSUTCDATETIME() THEN 1 END) AS scheduled,
           CAST(0 AS BIGINT) AS held,
           COUNT_BIG(CASE WHEN state = 'dead' THEN 1 END) AS dead
    FROM {{table "jobs"}}
    GROUP BY queue, kind
    UNION ALL
    SELECT queue, kind, 0, 0, COUNT_BIG(*), 0
    FROM {{table "jobs_inflight"}}
    GROUP BY queue, kind
) AS s
GROUP BY s.queue, s.kind
ORDER BY s.queue, s.kind;
