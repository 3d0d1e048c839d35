-- Records tick $2 of schedule $1 (next tick $3) only if its last tick is
-- older: the row that comes back is this transaction's licence to enqueue
-- the tick's job. A concurrent advance of the same row waits for this one
-- to end and then finds last_tick no longer older, so it returns nothing.
UPDATE {{table "schedules"}}
SET last_tick = $2, next_tick = $3, updated_at = now()
WHERE name = $1 AND (last_tick IS NULL OR last_tick < $2)
RETURNING paused
