-- enqueue_unique: insert one job unless its queue holds a job with its
-- dedupe key, and return the id of the one or the other and whether it
-- existed (1) or was inserted (0). Never a duplicate-key error: the read of
-- the key takes an update lock on it, or on the gap where it would be,
-- held to the end of the transaction (UPDLOCK, HOLDLOCK), so a concurrent
-- enqueue of the same key waits until this transaction ends and then finds
-- it, and a job found cannot complete and free its key before then. Runs in
-- a transaction, the caller's (inside a savepoint) or the driver's; no
-- XACT_ABORT, so no error here ends the caller's transaction. run_at NULL
-- means now + delay on the database clock, as in enqueue.sql.
SET NOCOUNT ON;
DECLARE @existing BIGINT;
DECLARE @ids TABLE (id BIGINT NOT NULL PRIMARY KEY);
SELECT @existing = d.id
FROM {{table "jobs_dedupe"}} AS d WITH (UPDLOCK, HOLDLOCK, ROWLOCK)
WHERE d.queue = @queue AND d.dedupe_key = @dedupe_key;
IF @existing IS NULL
BEGIN
    INSERT INTO {{table "jobs"}} (id, queue, kind, payload, priority, run_at,
           attempt, max_attempts, state, dedupe_key, created_at)
    OUTPUT inserted.id INTO @ids (id)
    VALUES (NEXT VALUE FOR {{sequence "jobs_id_seq"}}, @queue, @kind, @payload, @priority,
           CASE WHEN @run_at IS NULL
                THEN DATEADD(millisecond, @delay_ms, DATEADD(second, @delay_s, SYSUTCDATETIME()))
                ELSE CONVERT(DATETIME2(6), SWITCHOFFSET(@run_at, '+00:00')) END,
           0, @max_attempts, 'ready', @dedupe_key, SYSUTCDATETIME());
    INSERT INTO {{table "jobs_dedupe"}} (queue, dedupe_key, id)
    SELECT @queue, @dedupe_key, id FROM @ids;
    SELECT id, CAST(0 AS BIT) FROM @ids;
END
ELSE
    SELECT @existing, CAST(1 AS BIT);
