-- claim (Strategy UpdLock) on Babelfish for PostgreSQL: the first @n ready
-- jobs in claim order, moved into jobs_inflight by one DELETE ... OUTPUT
-- INTO and returned by their token, as in babelfish/claim.sql. Babelfish
-- 4.4 fails a DELETE through a CTE (stack depth limit exceeded), so the
-- pick is made first, into @pick, as in babelfish/claim.sql; UPDLOCK, READPAST and the other hints are left out
-- (see babelfish/claim.sql); SET LOCK_TIMEOUT 200 around the DELETE makes a claimer that
-- meets a row another holds fail within 200 ms and pick again, where UPDLOCK
-- with READPAST would skip it.
-- Picking first leaves a race the one-statement claim has not: every
-- picked row taken by another claim between the pick and the DELETE. Then
-- the DELETE moves nothing though jobs are ready, and a worker that stops
-- on an empty claim (dbq work --exit-when-empty) stopped at once beside
-- another draining the queue; so the batch picks again, up to three
-- rounds, while its pick is not empty and it has moved nothing.
SET NOCOUNT ON;
DECLARE @pick TABLE (id BIGINT NOT NULL PRIMARY KEY);
DECLARE @picked INT = 1, @moved INT = 0, @round INT = 0;
WHILE @moved = 0 AND @picked > 0 AND @round < 3
BEGIN
    SET @round = @round + 1;
    DELETE FROM @pick;
    INSERT INTO @pick (id)
    SELECT TOP (@n) id
    FROM {{table "jobs"}}
    WHERE queue = @queue AND state = 'ready' AND run_at <= SYSUTCDATETIME()
      AND NOT EXISTS (SELECT 1 FROM {{table "queues"}} AS p
                      WHERE p.queue = @queue AND p.paused = 1)
    ORDER BY priority, run_at, id;
    SET @picked = @@ROWCOUNT;
    IF @picked > 0
    BEGIN
        SET LOCK_TIMEOUT 200;
        DELETE j
        OUTPUT deleted.id, deleted.queue, deleted.kind, deleted.payload, deleted.priority, deleted.run_at,
               deleted.attempt, deleted.max_attempts, deleted.last_error, deleted.dedupe_key, deleted.created_at,
               @token, DATEADD(millisecond, @lease_ms, DATEADD(second, @lease_s, SYSUTCDATETIME()))
          INTO {{table "jobs_inflight"}} (id, queue, kind, payload, priority, run_at,
               attempt, max_attempts, last_error, dedupe_key, created_at,
               claim_token, claimed_until)
        FROM {{table "jobs"}} AS j
        INNER JOIN @pick AS k ON j.id = k.id
        WHERE j.state = 'ready' AND j.run_at <= SYSUTCDATETIME();
        SET @moved = @@ROWCOUNT;
        SET LOCK_TIMEOUT -1;
    END;
END;
SELECT id, queue, kind, payload, priority, run_at, attempt, max_attempts, last_error, dedupe_key, created_at,
       claimed_until
FROM {{table "jobs_inflight"}}
WHERE claim_token = @token;
