-- Stores a schedule (name, spec, time zone, queue, next tick, seen at), or
-- updates its definition; its last tick and paused flag stay as they are.
-- spec_since becomes the time seen (the scheduler's clock) only when the
-- spec or time zone changes: a scheduler starting later then fires nothing
-- the old spec owed. It is assigned first, since MySQL and MariaDB evaluate
-- the assignments in order and a later one reads the new spec. The values
-- are passed again rather than read back with VALUES(), which MySQL 8.0.20
-- deprecated, or a row alias, which MariaDB lacks.
INSERT INTO {{table "schedules"}} (name, spec, time_zone, queue, next_tick, spec_since, seen_at, updated_at)
VALUES (?, ?, ?, ?, CAST(? AS DATETIME(6)), CAST(? AS DATETIME(6)), CAST(? AS DATETIME(6)), UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE
    spec_since = IF(spec = ? AND time_zone = ?, spec_since, CAST(? AS DATETIME(6))),
    spec = ?, time_zone = ?, queue = ?, next_tick = CAST(? AS DATETIME(6)),
    seen_at = CAST(? AS DATETIME(6)), updated_at = UTC_TIMESTAMP(6)
