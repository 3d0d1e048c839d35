-- The counts of every process and kind summed per queue and minute, for
-- minutes at or after ? (UTC text): a range of the key.
SELECT queue, minute, CAST(SUM(completed) AS SIGNED), CAST(SUM(retried) AS SIGNED), CAST(SUM(dead) AS SIGNED)
FROM {{table "activity"}}
WHERE minute >= CAST(? AS DATETIME)
GROUP BY queue, minute
ORDER BY queue, minute
