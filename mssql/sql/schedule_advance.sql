-- schedule_advance: record tick @tick (and @next_tick) of schedule @name
-- only if its last tick is older; the row OUTPUT is this transaction's
-- licence to enqueue the tick's job. Runs in the driver's transaction: the
-- UPDATE's exclusive key lock makes a concurrent advance of the schedule
-- wait for the commit, then find last_tick no longer older.
SET NOCOUNT ON;
UPDATE {{table "schedules"}} WITH (ROWLOCK)
SET last_tick = CONVERT(DATETIME2(6), SWITCHOFFSET(@tick, '+00:00')),
    next_tick = CONVERT(DATETIME2(6), SWITCHOFFSET(@next_tick, '+00:00')),
    updated_at = SYSUTCDATETIME()
OUTPUT inserted.paused
WHERE name = @name AND (last_tick IS NULL OR last_tick < CONVERT(DATETIME2(6), SWITCHOFFSET(@tick, '+00:00')));
