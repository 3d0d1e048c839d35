SELECT name, spec, time_zone, queue, last_tick, next_tick, paused, updated_at, spec_since, seen_at
FROM {{table "schedules"}}
ORDER BY name
