-- Stores process ?1 (host ?2, pid ?3, queues ?4, concurrency ?5, started
-- ?6 and seen ?7 in µs), or updates what changes while it runs: its
-- heartbeat.
INSERT INTO {{table "processes"}} (id, host, pid, queues, concurrency, started_at, seen_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
ON CONFLICT (id) DO UPDATE
SET queues = excluded.queues, concurrency = excluded.concurrency, seen_at = excluded.seen_at
