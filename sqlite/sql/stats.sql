-- Counts jobs per queue. A claimed job whose lease has expired counts as
-- ready: the next claim takes it back. The oldest ready age is in seconds.
-- paused is one primary-key probe per queue.
WITH n(now) AS (SELECT CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000)
SELECT j.queue,
       SUM(j.state = 'ready' AND j.run_at <= n.now)
         + SUM(j.state = 'claimed' AND j.claimed_until < n.now)   AS ready,
       SUM(j.state = 'ready' AND j.run_at > n.now)                AS scheduled,
       SUM(j.state = 'claimed' AND j.claimed_until >= n.now)      AS held,
       SUM(j.state = 'dead')                                      AS dead,
       COALESCE((n.now - MIN(CASE WHEN j.state = 'ready' AND j.run_at <= n.now
                                  THEN j.run_at END)) / 1e6, 0.0) AS oldest_ready_age,
       COALESCE((SELECT p.paused FROM {{table "queues"}} AS p WHERE p.queue = j.queue), 0) AS paused
FROM {{table "jobs"}} AS j, n
GROUP BY j.queue
ORDER BY j.queue
