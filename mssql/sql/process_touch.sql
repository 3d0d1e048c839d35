-- process_touch: store process @id (host, pid, queues, concurrency,
-- started, seen), or update what changes while it runs — queues,
-- concurrency and seen: its heartbeat. Only the process itself writes its
-- row; the update's key lock, or key-range lock when the row is missing
-- (UPDLOCK, HOLDLOCK), makes it a safe upsert all the same. XACT_ABORT
-- rolls back on any error or client cancel.
SET NOCOUNT ON;
SET XACT_ABORT ON;
BEGIN TRANSACTION;
UPDATE {{table "processes"}} WITH (UPDLOCK, HOLDLOCK)
SET queues = @queues, concurrency = @concurrency, seen_at = CONVERT(DATETIME2(6), SWITCHOFFSET(@seen, '+00:00'))
WHERE id = @id;
IF @@ROWCOUNT = 0
    INSERT INTO {{table "processes"}} (id, host, pid, queues, concurrency, started_at, seen_at)
    VALUES (@id, @host, @pid, @queues, @concurrency, CONVERT(DATETIME2(6), SWITCHOFFSET(@started, '+00:00')),
        CONVERT(DATETIME2(6), SWITCHOFFSET(@seen, '+00:00')));
COMMIT TRANSACTION;
