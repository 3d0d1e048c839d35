-- Counts per queue: one pass over the claim index, which covers every column
-- read here, and per queue one primary-key probe of the queues table for
-- its pause flag.
SELECT j.queue,
       SUM(j.state = 'ready' AND j.run_at <= UTC_TIMESTAMP(6)),
       SUM(j.state = 'ready' AND j.run_at > UTC_TIMESTAMP(6)),
       SUM(j.state = 'claimed'),
       SUM(j.state = 'dead'),
       COALESCE(TIMESTAMPDIFF(MICROSECOND,
           MIN(CASE WHEN j.state = 'ready' AND j.run_at <= UTC_TIMESTAMP(6) THEN j.run_at END),
           UTC_TIMESTAMP(6)), 0),
       EXISTS (SELECT 1 FROM {{table "queues"}} AS p WHERE p.queue = j.queue AND p.paused)
FROM {{table "jobs"}} AS j FORCE INDEX ({{ident "jobs_claim"}})
GROUP BY j.queue
ORDER BY j.queue
