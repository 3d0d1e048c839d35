-- The counts of every process and kind summed per queue and minute, for
-- minutes at or after ?1 (µs): a range of the key.
SELECT queue, minute, SUM(completed), SUM(retried), SUM(dead)
FROM {{table "activity"}}
WHERE minute >= ?1
GROUP BY queue, minute
ORDER BY queue, minute
