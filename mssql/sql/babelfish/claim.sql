-- claim (Strategy DeleteTop) on Babelfish for PostgreSQL. Three differences
-- from claim.sql, both Babelfish's (4.4):
--   * A DELETE with OUTPUT ... INTO and a second OUTPUT fails (syntax error
--     at or near "OUTPUT"). The DELETE here has the OUTPUT INTO only; the
--     next statement returns the rows it moved, found by the claim's token
--     (unique per claim). The move stays one atomic statement: a worker
--     that dies before the SELECT leaves leases that expire and are
--     rescued, as after any crash.
--   * No table hints. Babelfish ignores them (escape_hatch_table_hints =
--     ignore, its default); locking is PostgreSQL's. SET LOCK_TIMEOUT 200
--     around the DELETE (Babelfish maps it to PostgreSQL's lock_timeout)
--     stands in for NOWAIT: a DELETE that meets a row locked by another
--     claim or an export fails within 200 ms ("canceling statement due to
--     lock timeout", error 33557097, classified as 1222 is) and the caller
--     picks again. Not 0, and not for the whole batch: the table
--     variable's own catalog work then timed out too, and the server
--     process crashed (signal 11) resetting that connection.
--   * The random pick is made first, into @pick: inside the DELETE's IN
--     (...) Babelfish matched fewer rows than the pick held (a claim of 5
--     ready jobs took 2).
-- https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/babelfish-compatibility.tsql.limitations.html
-- https://babelfishpg.org/docs/usage/limitations-of-babelfish/
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
    SELECT TOP (@n) r.id
    FROM (
        SELECT TOP (@window) id
        FROM {{table "jobs"}}
        WHERE queue = @queue AND state = 'ready' AND run_at <= SYSUTCDATETIME()
          AND NOT EXISTS (SELECT 1 FROM {{table "queues"}} AS p
                          WHERE p.queue = @queue AND p.paused = 1)
        ORDER BY priority, run_at, id
    ) AS r
    ORDER BY CHECKSUM(NEWID());
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
