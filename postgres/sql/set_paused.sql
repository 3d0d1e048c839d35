-- Pauses ($2 true) or resumes queue $1.
INSERT INTO {{table "queues"}} (queue, paused, updated_at)
VALUES ($1, $2, now())
ON CONFLICT (queue) DO UPDATE SET paused = excluded.paused, updated_at = now()
