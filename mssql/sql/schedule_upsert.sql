-- schedule_upsert: store schedule @name (spec, time zone, queue, next
-- tick), or update its definition, as seen at @at (the scheduler's clock);
-- its last tick and paused flag stay. spec_since becomes @at only when the
-- spec or time zone changes (the SET reads the row as it was): a scheduler
-- starting later then fires nothing the old spec owed. The update's key
-- lock, or key-range lock when the row is missing (UPDLOCK, HOLDLOCK), is
-- held until COMMIT, so two schedulers starting at once cannot both insert:
-- the second waits, then updates. XACT_ABORT rolls back on any error or
-- client cancel.
SET NOCOUNT ON;
SET XACT_ABORT ON;
BEGIN TRANSACTION;
UPDATE {{table "schedules"}} WITH (UPDLOCK, HOLDLOCK)
SET spec_since = CASE WHEN spec = @spec AND time_zone = @time_zone THEN spec_since
                      ELSE CONVERT(DATETIME2(6), SWITCHOFFSET(@at, '+00:00')) END,
    spec = @spec, time_zone = @time_zone, queue = @queue,
    next_tick = CONVERT(DATETIME2(6), SWITCHOFFSET(@next_tick, '+00:00')),
    seen_at = CONVERT(DATETIME2(6), SWITCHOFFSET(@at, '+00:00')), updated_at = SYSUTCDATETIME()
WHERE name = @name;
IF @@ROWCOUNT = 0
    INSERT INTO {{table "schedules"}} (name, spec, time_zone, queue, next_tick, spec_since, seen_at, paused, updated_at)
    VALUES (@name, @spec, @time_zone, @queue, CONVERT(DATETIME2(6), SWITCHOFFSET(@next_tick, '+00:00')),
        CONVERT(DATETIME2(6), SWITCHOFFSET(@at, '+00:00')), CONVERT(DATETIME2(6), SWITCHOFFSET(@at, '+00:00')), 0, SYSUTCDATETIME());
COMMIT TRANSACTION;
