-- rescue: one pass of the sweep that moves up to @batch jobs whose lease
-- has expired back to jobs. The run is counted as a failed attempt, as
-- River and Oban count it, so a job that kills its workers ends dead
-- instead of looping; the job is ready at once.
--
-- One pass at a time per table: the pass holds the application lock
-- @lock_resource (named after the table) for its transaction, and a pass
-- that cannot have it at once (sp_getapplock returns < 0; @LockTimeout = 0
-- waits for nothing and raises no error) moves nothing. COMMIT, or the
-- rollback XACT_ABORT makes of any error or client cancel, releases it, so
-- no lock outlives the pass. A pass that sees no expired lease (an index
-- seek) takes neither lock nor transaction; that look also fails on a
-- missing table before any transaction begins. Rows another statement
-- holds are skipped (READPAST), not waited on; READCOMMITTEDLOCK lets
-- READPAST run under read committed snapshot too. Returns the lock's
-- return code (0 when no lock was needed) and how many jobs moved.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @granted INT = 0;
DECLARE @moved INT = 0;
IF EXISTS (SELECT 1 FROM {{table "jobs_inflight"}} WITH (READPAST, READCOMMITTEDLOCK)
           WHERE claimed_until < SYSUTCDATETIME())
BEGIN
    BEGIN TRANSACTION;
    EXEC @granted = sys.sp_getapplock @Resource = @lock_resource, @LockMode = 'Exclusive',
         @LockOwner = 'Transaction', @LockTimeout = 0;
    IF @granted >= 0
    BEGIN
        DELETE TOP (@batch) FROM {{table "jobs_inflight"}} WITH (READPAST, ROWLOCK, READCOMMITTEDLOCK)
        OUTPUT deleted.id, deleted.queue, deleted.kind, deleted.payload, deleted.priority, SYSUTCDATETIME(),
               deleted.attempt + 1, deleted.max_attempts,
               CASE WHEN deleted.attempt + 1 >= deleted.max_attempts THEN 'dead' ELSE 'ready' END,
               @error, deleted.dedupe_key, deleted.created_at
          INTO {{table "jobs"}} (id, queue, kind, payload, priority, run_at,
               attempt, max_attempts,
               state,
               last_error, dedupe_key, created_at)
        WHERE claimed_until < SYSUTCDATETIME();
        SET @moved = @@ROWCOUNT;
    END;
    COMMIT TRANSACTION;
END;
SELECT @granted, @moved;
