-- Pauses (?2 = 1) or resumes (?2 = 0) schedule ?1; no row: it is not stored.
UPDATE {{table "schedules"}}
SET paused = ?2, updated_at = CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000
WHERE name = ?1
