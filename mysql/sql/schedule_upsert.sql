-- Stores a schedule (name, spec, time zone, queue, next tick), or updates
-- its definition; its last tick and paused flag stay as they are. The
-- values are passed twice rather than read back with VALUES(), which MySQL
-- 8.0.20 deprecated, or a row alias, which MariaDB lacks.
INSERT INTO {{table "schedules"}} (name, spec, time_zone, queue, next_tick, updated_at)
VALUES (?, ?, ?, ?, CAST(? AS DATETIME(6)), UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE spec = ?, time_zone = ?, queue = ?, next_tick = CAST(? AS DATETIME(6)),
    updated_at = UTC_TIMESTAMP(6)
