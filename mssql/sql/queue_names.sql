-- queue_names: the queues with stored jobs, in name order, for CountQueues,
-- each with its number of held jobs. The clustered key starts with queue,
-- so each MIN(queue) > @q is one seek: a skip through the index, one seek
-- per queue, not a scan of the jobs. Held jobs are the rows of
-- jobs_inflight, whose keys do not start with queue: they are read once
-- here (as many as there are jobs in flight) and counted per queue, rather
-- than once per queue by count_queue.sql.
SET NOCOUNT ON;
DECLARE @names TABLE (queue VARCHAR(64) COLLATE Latin1_General_BIN2 NOT NULL PRIMARY KEY);
DECLARE @held TABLE (queue VARCHAR(64) COLLATE Latin1_General_BIN2 NOT NULL PRIMARY KEY, n BIGINT NOT NULL);
DECLARE @q VARCHAR(64) = (SELECT MIN(queue) FROM {{table "jobs"}});
WHILE @q IS NOT NULL
BEGIN
    INSERT INTO @names (queue) VALUES (@q);
    SET @q = (SELECT MIN(queue) FROM {{table "jobs"}} WHERE queue > @q);
END;
INSERT INTO @held (queue, n)
SELECT i.queue, COUNT_BIG(*) FROM {{table "jobs_inflight"}} AS i GROUP BY i.queue;
INSERT INTO @names (queue)
SELECT h.queue FROM @held AS h
WHERE NOT EXISTS (SELECT 1 FROM @names AS n WHERE n.queue = h.queue);
SELECT n.queue, COALESCE(h.n, 0) FROM @names AS n LEFT JOIN @held AS h ON h.queue = n.queue ORDER BY n.queue;
