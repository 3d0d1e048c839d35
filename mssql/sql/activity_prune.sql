-- activity_prune: delete at most @limit activity rows of minutes before
-- @before, a bounded batch, so a long backlog is pruned a batch per flush.
-- Autocommit. No SET NOCOUNT ON: the caller reads the rows affected,
-- which NOCOUNT ON keeps out of the DONE token (0 rows, always).
DELETE TOP (@limit) FROM {{table "activity"}}
WHERE minute < CONVERT(DATETIME2(0), SWITCHOFFSET(@before, '+00:00'));
