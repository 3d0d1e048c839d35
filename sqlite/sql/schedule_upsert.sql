-- Stores schedule ?1 (spec ?2, time zone ?3, queue ?4, next tick ?5 in
-- microseconds), or updates its definition, as seen at ?6 (the scheduler's
-- clock). spec_since becomes ?6 only when the spec or time zone changes: a
-- scheduler starting later then fires nothing the old spec owed. Its last
-- tick and paused flag stay as they are.
INSERT INTO {{table "schedules"}} (name, spec, time_zone, queue, next_tick, spec_since, seen_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000)
ON CONFLICT (name) DO UPDATE
SET spec = excluded.spec, time_zone = excluded.time_zone, queue = excluded.queue,
    next_tick = excluded.next_tick,
    spec_since = CASE WHEN spec = excluded.spec AND time_zone = excluded.time_zone
                      THEN spec_since ELSE excluded.spec_since END,
    seen_at = excluded.seen_at, updated_at = excluded.updated_at
