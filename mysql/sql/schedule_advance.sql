-- Records a tick (last_tick) and the one after it (next_tick) of schedule
-- name only if its last tick is older: one affected row is this
-- transaction's licence to enqueue the tick's job. The UPDATE locks the row
-- by primary key; a concurrent advance waits for this transaction to end,
-- then reads the committed row (READ COMMITTED), finds last_tick no longer
-- older, and changes nothing.
UPDATE {{table "schedules"}}
SET last_tick = CAST(? AS DATETIME(6)), next_tick = CAST(? AS DATETIME(6)), updated_at = UTC_TIMESTAMP(6)
WHERE name = ? AND (last_tick IS NULL OR last_tick < CAST(? AS DATETIME(6)))
