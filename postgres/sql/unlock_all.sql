-- Releases every session advisory lock and clears the claimer's mark, when
-- an advisory claimer closes and gives its connection back to the pool.
-- The session guard (session.sql): $1 is the claimer's mark on its
-- session; run in any other session (a transaction pooler handed the
-- statement to another server connection) the statement fails before it
-- takes, checks or releases a lock.
SELECT pg_advisory_unlock_all(), set_config('dbq.claimer', '', false)
WHERE CASE WHEN current_setting('dbq.claimer', true) = $1::text THEN true
         ELSE ('dbq: postgres: server process ' || pg_backend_pid()
               || ' is not the advisory claimer''s session: a transaction pooler is in the way')::bool END
