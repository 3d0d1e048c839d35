-- Counts per queue and kind, with stats.sql's states: ready (due), scheduled
-- (ready, not due), held and dead. No index has kind, so this is one pass
-- over the table's rows; kind is VARBINARY, so kinds group and sort byte
-- for byte, and a job with no kind counts under ''. The number of groups
-- is what a caller exporting them as metric labels must bound.
SELECT queue, kind,
       SUM(state = 'ready' AND run_at <= UTC_TIMESTAMP(6)),
       SUM(state = 'ready' AND run_at > UTC_TIMESTAMP(6)),
       SUM(state = 'claimed'),
       SUM(state = 'dead')
FROM {{table "jobs"}}
GROUP BY queue, kind
ORDER BY queue, kind
