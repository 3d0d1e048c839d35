-- Releases session advisory locks, given as parallel arrays of (namespace,
-- key). Used after a completion, retry or release has committed, for
-- post-check drops, and to sweep up locks a cut-off claim left behind.
-- The session guard (session.sql): $3 is the claimer's mark on its
-- session; run in any other session (a transaction pooler handed the
-- statement to another server connection) the statement fails before it
-- takes, checks or releases a lock.
SELECT u.ns, u.k, pg_advisory_unlock(u.ns, u.k) AS unlocked
FROM unnest($1::int4[], $2::int4[]) AS u(ns, k)
WHERE CASE WHEN current_setting('dbq.claimer', true) = $3::text THEN true
         ELSE ('dbq: postgres: server process ' || pg_backend_pid()
               || ' is not the advisory claimer''s session: a transaction pooler is in the way')::bool END
