-- Inserts one job as enqueue.sql does, unless a job of its queue already
-- holds its dedupe key: then it inserts nothing and returns no row. VALUES,
-- not SELECT, precedes the upsert clause, so SQLite parses it without the
-- ambiguity its docs warn of.
INSERT INTO {{table "jobs"}} (queue, kind, payload, priority, run_at, max_attempts, dedupe_key, created_at)
VALUES (?, ?, ?, ?, COALESCE(?, (CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000) + ?), ?, ?, (CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000))
ON CONFLICT DO NOTHING
RETURNING id
