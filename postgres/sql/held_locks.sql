-- The two-key advisory locks this session holds, as (namespace, key).
-- Used to find and release locks a cut-off claim left behind.
-- The session guard (session.sql): $1 is the claimer's mark on its
-- session; run in any other session (a transaction pooler handed the
-- statement to another server connection) the statement fails before it
-- takes, checks or releases a lock.
SELECT classid::int4 AS ns, objid::int4 AS k
FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 2 AND granted
  AND pid = pg_backend_pid()
  AND CASE WHEN current_setting('dbq.claimer', true) = $1::text THEN true
         ELSE ('dbq: postgres: server process ' || pg_backend_pid()
               || ' is not the advisory claimer''s session: a transaction pooler is in the way')::bool END
