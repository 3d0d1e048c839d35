-- Completes advisory-held jobs: deletes them. Run alone (in CompleteClaim,
-- pipelined with the claim's walk, but in an implicit transaction of its
-- own), so that it has committed before unlock.sql releases their locks:
-- unlocking first would let another claimer lock a job whose delete its
-- post-check cannot see yet.
-- The ids join on the primary key, and the state test is written as a
-- CASE so that no partial index (claim, lease, dead: each is "WHERE state
-- = ...") can serve the statement: with "state = 'ready'" and no
-- statistics yet (a new table) the planner read the whole partial claim
-- index and filtered or hashed on id, 40 ms per 100 jobs on a 50,000-job
-- table instead of 0.5 ms. Every statement that takes a list of ids does
-- the same (plan_test.go checks their generic plans).
-- The session guard (session.sql): $2 is the claimer's mark on its
-- session; run in any other session (a transaction pooler handed the
-- statement to another server connection) the statement fails before it
-- takes, checks or releases a lock.
DELETE FROM {{table "jobs"}} AS t
USING unnest($1::int8[]) AS k(id)
WHERE t.id = k.id AND CASE t.state WHEN 'ready' THEN true END
  AND CASE WHEN current_setting('dbq.claimer', true) = $2::text THEN true
         ELSE ('dbq: postgres: server process ' || pg_backend_pid()
               || ' is not the advisory claimer''s session: a transaction pooler is in the way')::bool END
RETURNING t.id
