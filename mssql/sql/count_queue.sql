-- count_queue: counts queue @queue as stats.sql does, but each count stops
-- at @limit (TOP), so it reads about @limit rows of the clustered key
-- (queue, state, priority, run_at, id) per state however many jobs are
-- stored. The loop skips from priority to priority of the queue's ready
-- rows (one seek each). Within a priority the key is in run_at order, so
-- its due rows are one range and its future rows the next: ready and
-- scheduled seek into just that range, each read capped at what its count
-- still lacks of @limit, so a count reads at most about @limit rows in
-- all, whatever the mix of due and future jobs. The oldest ready wait is
-- exact: the first run_at of each priority, the oldest of those if it has
-- passed, in microseconds. Held jobs are the queue's rows of
-- jobs_inflight, @held, counted by queue_names.sql. paused is one
-- primary-key probe.
SET NOCOUNT ON;
DECLARE @now DATETIME2(6) = SYSUTCDATETIME();
DECLARE @ready BIGINT = 0, @scheduled BIGINT = 0;
DECLARE @oldest DATETIME2(6), @first DATETIME2(6);
DECLARE @p SMALLINT = (SELECT MIN(priority) FROM {{table "jobs"}} WHERE queue = @queue AND state = 'ready');
WHILE @p IS NOT NULL
BEGIN
    SET @first = (SELECT MIN(run_at) FROM {{table "jobs"}} WHERE queue = @queue AND state = 'ready' AND priority = @p);
    IF @oldest IS NULL OR @first < @oldest SET @oldest = @first;
    SET @ready += (SELECT COUNT_BIG(*) FROM (SELECT TOP (@limit - @ready) 1 AS x FROM {{table "jobs"}}
            WHERE queue = @queue AND state = 'ready' AND priority = @p AND run_at <= @now) AS c);
    SET @scheduled += (SELECT COUNT_BIG(*) FROM (SELECT TOP (@limit - @scheduled) 1 AS x FROM {{table "jobs"}}
            WHERE queue = @queue AND state = 'ready' AND priority = @p AND run_at > @now) AS c);
    SET @p = (SELECT MIN(priority) FROM {{table "jobs"}} WHERE queue = @queue AND state = 'ready' AND priority > @p);
END;
SELECT @ready, @scheduled,
       CASE WHEN @held < @limit THEN @held ELSE @limit END,
       (SELECT COUNT_BIG(*) FROM (SELECT TOP (@limit) 1 AS x FROM {{table "jobs"}}
            WHERE queue = @queue AND state = 'dead') AS c),
       CASE WHEN @oldest <= @now THEN DATEDIFF_BIG(microsecond, @oldest, @now) ELSE 0 END,
       CAST(CASE WHEN EXISTS (SELECT 1 FROM {{table "queues"}} AS p
                              WHERE p.queue = @queue AND p.paused = 1)
                 THEN 1 ELSE 0 END AS BIT);
