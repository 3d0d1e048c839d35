-- process_prune: delete the processes not seen since @before.
SET NOCOUNT ON;
DELETE FROM {{table "processes"}}
WHERE seen_at < CONVERT(DATETIME2(6), SWITCHOFFSET(@before, '+00:00'));
