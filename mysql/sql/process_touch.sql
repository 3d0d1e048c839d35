-- Stores a process (id, host, pid, queues, concurrency, started, seen),
-- or updates what changes while it runs: its heartbeat. The changing
-- values are passed twice rather than read back with VALUES().
INSERT INTO {{table "processes"}} (id, host, pid, queues, concurrency, started_at, seen_at)
VALUES (?, ?, ?, ?, ?, CAST(? AS DATETIME(6)), CAST(? AS DATETIME(6)))
ON DUPLICATE KEY UPDATE queues = ?, concurrency = ?, seen_at = CAST(? AS DATETIME(6))
