-- +goose Up
-- Two times of a schedule (package schedule), both on the clock of the
-- scheduler that stores them, as ticks are; UTC. spec_since: when the
-- stored spec and time zone replaced different ones (or the row was made);
-- a scheduler starts from the later of it and last_tick, so a changed spec
-- never fires a tick that the old spec did not owe. seen_at: when a
-- scheduler last stored the definition; running schedulers refresh it, so a
-- row no scheduler defines any more can be shown as stale and pruned. Rows
-- made before this version count as seen at their last update; their
-- spec_since stays NULL (their last tick alone says where they stand).
-- Nullable columns with no default are a metadata-only change. goose sends
-- each statement as a batch of its own, so the UPDATE compiles after the
-- columns exist. One column per ALTER TABLE: Babelfish refuses a list.
ALTER TABLE {{table "schedules"}} ADD spec_since DATETIME2(6) NULL;
ALTER TABLE {{table "schedules"}} ADD seen_at DATETIME2(6) NULL;
UPDATE {{table "schedules"}} SET seen_at = updated_at;

-- +goose Down
ALTER TABLE {{table "schedules"}} DROP COLUMN seen_at;
ALTER TABLE {{table "schedules"}} DROP COLUMN spec_since;
