-- schedule_delete: remove schedule @name; when @seen_before is not NULL,
-- only if no scheduler has stored it since (seen_at before it or unknown),
-- checked in this statement so that a refresh racing the prune keeps the
-- row. No row out means nothing was removed.
SET NOCOUNT ON;
DELETE FROM {{table "schedules"}}
OUTPUT deleted.name
WHERE name = @name
    AND (@seen_before IS NULL OR seen_at IS NULL OR seen_at < CONVERT(DATETIME2(6), SWITCHOFFSET(@seen_before, '+00:00')));
