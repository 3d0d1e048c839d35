-- queue_names: the queues with stored jobs, in name order, for CountQueues.
-- The clustered key starts with queue, so each MIN(queue) > @q is one seek:
-- a skip through the index, one seek per queue, not a scan of the jobs.
-- Held jobs are in jobs_inflight (as many as there are jobs in flight).
SET NOCOUNT ON;
DECLARE @names TABLE (queue VARCHAR(64) COLLATE Latin1_General_BIN2 NOT NULL PRIMARY KEY);
DECLARE @q VARCHAR(64) = (SELECT MIN(queue) FROM {{table "jobs"}});
WHILE @q IS NOT NULL
BEGIN
    INSERT INTO @names (queue) VALUES (@q);
    SET @q = (SELECT MIN(queue) FROM {{table "jobs"}} WHERE queue > @q);
END;
INSERT INTO @names (queue)
SELECT DISTINCT i.queue FROM {{table "jobs_inflight"}} AS i
WHERE NOT EXISTS (SELECT 1 FROM @names AS n WHERE n.queue = i.queue);
SELECT queue FROM @names ORDER BY queue;
