-- Removes schedule $1; when $2 is not NULL, only if no scheduler has stored
-- it since $2 (seen_at before it or unknown), checked in this statement so
-- that a refresh racing the prune keeps the row.
DELETE FROM {{table "schedules"}}
WHERE name = $1 AND ($2::timestamptz IS NULL OR seen_at IS NULL OR seen_at < $2)
