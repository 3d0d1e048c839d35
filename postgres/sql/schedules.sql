SELECT name, spec, time_zone, queue, last_tick, next_tick, paused, updated_at
FROM {{table "schedules"}}
ORDER BY name
