-- The processes, most recently started first.
SELECT id, host, pid, queues, concurrency, started_at, seen_at
FROM {{table "processes"}}
ORDER BY started_at DESC, id
