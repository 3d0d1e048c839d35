-- The two-key advisory locks this session holds, as (namespace, key).
-- Used to find and release locks a cut-off claim left behind.
SELECT classid::int4 AS ns, objid::int4 AS k
FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 2 AND granted
  AND pid = pg_backend_pid()
