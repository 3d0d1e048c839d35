-- Counts jobs per queue and kind (jobs without one under ''), with the
-- states of stats.sql: a claimed job whose lease has expired counts as
-- ready, since the next claim takes it back.
WITH n(now) AS (SELECT CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000)
SELECT j.queue, j.kind,
       SUM(j.state = 'ready' AND j.run_at <= n.now)
         + SUM(j.state = 'claimed' AND j.claimed_until < n.now)   AS ready,
       SUM(j.state = 'ready' AND j.run_at > n.now)                AS scheduled,
       SUM(j.state = 'claimed' AND j.claimed_until >= n.now)      AS held,
       SUM(j.state = 'dead')                                      AS dead
FROM {{table "jobs"}} AS j, n
GROUP BY j.queue, j.kind
ORDER BY j.queue, j.kind
