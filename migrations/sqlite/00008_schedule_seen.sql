-- +goose Up
-- Two times of a schedule (package schedule), both on the clock of the
-- scheduler that stores them, as ticks are; integer microseconds since the
-- Unix epoch. spec_since: when the stored spec and time zone replaced
-- different ones (or the row was made); a scheduler starts from the later
-- of it and last_tick, so a changed spec never fires a tick that the old
-- spec did not owe. seen_at: when a scheduler last stored the definition;
-- running schedulers refresh it, so a row no scheduler defines any more can
-- be shown as stale and pruned. Rows made before this version count as seen
-- at their last update; their spec_since stays NULL (their last tick alone
-- says where they stand).
ALTER TABLE {{table "schedules"}} ADD COLUMN spec_since INTEGER;
ALTER TABLE {{table "schedules"}} ADD COLUMN seen_at INTEGER;
UPDATE {{table "schedules"}} SET seen_at = updated_at;

-- +goose Down
ALTER TABLE {{table "schedules"}} DROP COLUMN seen_at;
ALTER TABLE {{table "schedules"}} DROP COLUMN spec_since;
