-- Releases the locks of jobs a completion deleted: pipelined after
-- complete_advisory.sql in the same round trip, in an implicit transaction
-- of its own, so it runs after that delete's transaction ended, committed
-- or not. It unlocks only the jobs no longer ready - gone, that is, when
-- the delete committed - and returns their ids: a delete that failed
-- leaves its jobs ready and locked, as if it had not been sent (unlocking
-- them would let another claimer lock a job this one still holds). The
-- lock keys are (namespace $1, id folded to int4), as claim_advisory.sql
-- takes them. The ids join on the primary key; the state test is a CASE
-- for the reason complete_advisory.sql gives. OFFSET 0 keeps the EXISTS a
-- lookup per id: without it PostgreSQL 18 may plan it, in a generic plan
-- made while the table was small, as a hashed SubPlan over a sequential
-- scan of the whole table (enable_seqscan off does not stop it there).
-- The session guard (session.sql): $3 is the claimer's mark on its
-- session; run in any other session (a transaction pooler handed the
-- statement to another server connection) the statement fails before it
-- takes, checks or releases a lock.
SELECT u.id
FROM unnest($1::int4[], $2::int8[]) AS u(ns, id)
-- One CASE, so that its tests run in this order (the planner orders the
-- separate conditions of a WHERE by their cost, not as written).
WHERE CASE WHEN current_setting('dbq.claimer', true) IS DISTINCT FROM $3::text
                THEN ('dbq: postgres: server process ' || pg_backend_pid()
                      || ' is not the advisory claimer''s session: a transaction pooler is in the way')::bool
           WHEN EXISTS (SELECT 1 FROM {{table "jobs"}} AS t
                        WHERE t.id = u.id AND CASE t.state WHEN 'ready' THEN true END
                        OFFSET 0)
                THEN false
           ELSE pg_advisory_unlock(u.ns, u.id::bit(32)::int4)
      END
