-- activity_prune: delete at most @limit activity rows of minutes before
-- @before, a bounded batch, so a long backlog is pruned a batch per flush.
-- Autocommit.
SET NOCOUNT ON;
DELETE TOP (@limit) FROM {{table "activity"}}
WHERE minute < CONVERT(DATETIME2(0), SWITCHOFFSET(@before, '+00:00'));
