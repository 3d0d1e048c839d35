-- The counts of every process and kind summed per queue and minute, for
-- minutes at or after $1: a range of the key.
SELECT queue, minute, sum(completed)::int8, sum(retried)::int8, sum(dead)::int8
FROM {{table "activity"}}
WHERE minute >= $1
GROUP BY queue, minute
ORDER BY queue, minute
