-- count_queue: counts queue @queue as stats.sql does, but each count stops
-- at @limit (TOP), so it reads about @limit rows of the clustered key
-- (queue, state, priority, run_at, id) per state however many jobs are
-- stored. Ready reads the (queue, 'ready') range forwards, where each
-- priority's due rows come first, scheduled reads it backwards, where its
-- future rows come first; held jobs are the queue's rows of jobs_inflight.
-- The oldest ready wait is exact: the first run_at of each priority (one
-- seek each, skipping from priority to priority), the oldest of those if
-- it has passed, in microseconds. paused is one primary-key probe.
SET NOCOUNT ON;
DECLARE @oldest DATETIME2(6), @first DATETIME2(6);
DECLARE @p SMALLINT = (SELECT MIN(priority) FROM {{table "jobs"}} WHERE queue = @queue AND state = 'ready');
WHILE @p IS NOT NULL
BEGIN
    SET @first = (SELECT MIN(run_at) FROM {{table "jobs"}} WHERE queue = @queue AND state = 'ready' AND priority = @p);
    IF @oldest IS NULL OR @first < @oldest SET @oldest = @first;
    SET @p = (SELECT MIN(priority) FROM {{table "jobs"}} WHERE queue = @queue AND state = 'ready' AND priority > @p);
END;
SELECT (SELECT COUNT_BIG(*) FROM (SELECT TOP (@limit) 1 AS x FROM {{table "jobs"}}
            WHERE queue = @queue AND state = 'ready' AND run_at <= SYSUTCDATETIME()
            ORDER BY priority, run_at) AS c),
       (SELECT COUNT_BIG(*) FROM (SELECT TOP (@limit) 1 AS x FROM {{table "jobs"}}
            WHERE queue = @queue AND state = 'ready' AND run_at > SYSUTCDATETIME()
            ORDER BY priority DESC, run_at DESC) AS c),
       (SELECT COUNT_BIG(*) FROM (SELECT TOP (@limit) 1 AS x FROM {{table "jobs_inflight"}}
            WHERE queue = @queue) AS c),
       (SELECT COUNT_BIG(*) FROM (SELECT TOP (@limit) 1 AS x FROM {{table "jobs"}}
            WHERE queue = @queue AND state = 'dead') AS c),
       CASE WHEN @oldest <= SYSUTCDATETIME() THEN DATEDIFF_BIG(microsecond, @oldest, SYSUTCDATETIME()) ELSE 0 END,
       CAST(CASE WHEN EXISTS (SELECT 1 FROM {{table "queues"}} AS p
                              WHERE p.queue = @queue AND p.paused = 1)
                 THEN 1 ELSE 0 END AS BIT);
