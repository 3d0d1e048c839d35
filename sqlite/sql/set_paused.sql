-- Pauses (?2 = 1) or resumes (?2 = 0) queue ?1.
INSERT INTO {{table "queues"}} (queue, paused, updated_at)
VALUES (?1, ?2, CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000)
ON CONFLICT (queue) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at
