-- set_paused: pause (@paused = 1) or resume (0) queue @queue: update its
-- row of queues, or insert one. The update's key lock, or key-range lock
-- when the row is missing (UPDLOCK, HOLDLOCK), is held until COMMIT, so two
-- callers racing on a new queue cannot both insert: the second waits, then
-- updates. XACT_ABORT rolls back on any error or client cancel.
SET NOCOUNT ON;
SET XACT_ABORT ON;
BEGIN TRANSACTION;
UPDATE {{table "queues"}} WITH (UPDLOCK, HOLDLOCK)
SET paused = @paused, updated_at = SYSUTCDATETIME()
WHERE queue = @queue;
IF @@ROWCOUNT = 0
    INSERT INTO {{table "queues"}} (queue, paused, updated_at)
    VALUES (@queue, @paused, SYSUTCDATETIME());
COMMIT TRANSACTION;
