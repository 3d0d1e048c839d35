-- Inserts .N jobs, one parenthesised tuple per job. Per job: queue, kind
-- ('' for none), payload, priority, run_at in µs (NULL: now + delay), delay in µs,
-- max_attempts, dedupe_key. now is the database clock in integer µs since
-- the epoch, one value for the whole statement.
INSERT INTO {{table "jobs"}} (queue, kind, payload, priority, run_at, max_attempts, dedupe_key, created_at)
VALUES {{range $i := rows .N}}{{if $i}},
       {{end}}(?, ?, ?, ?, COALESCE(?, (CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000) + ?), ?, ?, (CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000)){{end}}
RETURNING id
