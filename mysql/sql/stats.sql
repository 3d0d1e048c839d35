-- Counts per queue: one pass over the claim index, which covers every column
-- read here.
SELECT queue,
       SUM(state = 'ready' AND run_at <= UTC_TIMESTAMP(6)),
       SUM(state = 'ready' AND run_at > UTC_TIMESTAMP(6)),
       SUM(state = 'claimed'),
       SUM(state = 'dead'),
       COALESCE(TIMESTAMPDIFF(MICROSECOND,
           MIN(CASE WHEN state = 'ready' AND run_at <= UTC_TIMESTAMP(6) THEN run_at END),
           UTC_TIMESTAMP(6)), 0)
FROM {{.Jobs}} FORCE INDEX ({{.ClaimIndex}})
GROUP BY queue
ORDER BY queue
