-- Stores schedule $1 (spec $2, time zone $3, queue $4, next tick $5), or
-- updates its definition, as seen at $6 (the scheduler's clock). spec_since
-- becomes $6 only when the spec or time zone changes: a scheduler starting
-- later then fires nothing the old spec owed. Its last tick and paused flag
-- stay as they are.
INSERT INTO {{table "schedules"}} AS s (name, spec, time_zone, queue, next_tick, spec_since, seen_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $6, now())
ON CONFLICT (name) DO UPDATE
SET spec = excluded.spec, time_zone = excluded.time_zone, queue = excluded.queue,
    next_tick = excluded.next_tick,
    spec_since = CASE WHEN s.spec = excluded.spec AND s.time_zone = excluded.time_zone
                      THEN s.spec_since ELSE excluded.spec_since END,
    seen_at = excluded.seen_at, updated_at = now()
