-- Stores schedule $1 (spec $2, time zone $3, queue $4, next tick $5), or
-- updates its definition; its last tick and paused flag stay as they are.
INSERT INTO {{table "schedules"}} (name, spec, time_zone, queue, next_tick, updated_at)
VALUES ($1, $2, $3, $4, $5, now())
ON CONFLICT (name) DO UPDATE
SET spec = excluded.spec, time_zone = excluded.time_zone, queue = excluded.queue,
    next_tick = excluded.next_tick, updated_at = now()
