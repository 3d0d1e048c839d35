-- activity: the counts of every process and kind summed per queue and
-- minute, for minutes at or after @since: a range of the clustered key.
SELECT queue, minute, SUM(completed) AS completed, SUM(retried) AS retried, SUM(dead) AS dead
FROM {{table "activity"}}
WHERE minute >= CONVERT(DATETIME2(0), SWITCHOFFSET(@since, '+00:00'))
GROUP BY queue, minute
ORDER BY queue, minute;
