-- Records tick ?2 of schedule ?1 (next tick ?3) only if its last tick is
-- older: the row that comes back is this transaction's licence to enqueue
-- the tick's job. Writers take turns, so a second advance of the tick
-- finds last_tick no longer older and returns nothing.
UPDATE {{table "schedules"}}
SET last_tick = ?2, next_tick = ?3, updated_at = CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000
WHERE name = ?1 AND (last_tick IS NULL OR last_tick < ?2)
RETURNING paused
