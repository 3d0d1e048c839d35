-- Pauses (? true) or resumes a schedule; no row: it is not stored.
UPDATE {{table "schedules"}} SET paused = ?, updated_at = UTC_TIMESTAMP(6) WHERE name = ?
