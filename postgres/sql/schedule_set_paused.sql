-- Pauses ($2 true) or resumes schedule $1; no row: it is not stored.
UPDATE {{table "schedules"}} SET paused = $2, updated_at = now() WHERE name = $1
