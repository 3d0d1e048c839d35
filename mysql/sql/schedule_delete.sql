-- Removes a schedule (name); when the time given is not NULL, only if no
-- scheduler has stored it since (seen_at before it or unknown), checked in
-- this statement so that a refresh racing the prune keeps the row.
DELETE FROM {{table "schedules"}}
WHERE name = ? AND (? IS NULL OR seen_at IS NULL OR seen_at < CAST(? AS DATETIME(6)))
