-- schedule_set_paused: pause (@paused = 1) or resume schedule @name; no
-- row out means it is not stored.
SET NOCOUNT ON;
UPDATE {{table "schedules"}}
SET paused = @paused, updated_at = SYSUTCDATETIME()
OUTPUT inserted.name
WHERE name = @name;
