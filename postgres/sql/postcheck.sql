-- The post-check (mandatory): run on the claiming connection
-- right after claim_advisory.sql, as a statement of its own (in the walk's
-- transaction only under READ COMMITTED, where it takes a snapshot of its
-- own). The ids are $1, or when $1 is NULL those the walk recorded in its
-- transaction (dbq.walked). A job that was
-- completed, retried or made dead by another claimer between the claim's
-- snapshot and its lock is gone or no longer ready here, because that
-- claimer unlocked only after its change committed. Only the rows returned
-- here are kept, and they are read fresh.
-- The ids join on the primary key; the state test is a CASE so that the
-- partial claim index cannot serve it (see complete_advisory.sql).
-- The session guard (session.sql): $2 is the claimer's mark on its
-- session; run in any other session (a transaction pooler handed the
-- statement to another server connection) the statement fails before it
-- takes, checks or releases a lock.
SELECT t.id, t.queue, t.payload, t.priority, t.run_at, t.attempt, t.max_attempts,
       t.last_error, t.dedupe_key, t.created_at, t.kind
FROM unnest(coalesce($1::int8[], string_to_array(current_setting('dbq.walked', true), ',')::int8[])) AS k(id)
JOIN {{table "jobs"}} AS t ON t.id = k.id
WHERE CASE t.state WHEN 'ready' THEN true END AND t.run_at <= now()
  AND CASE WHEN current_setting('dbq.claimer', true) = $2::text THEN true
         ELSE ('dbq: postgres: server process ' || pg_backend_pid()
               || ' is not the advisory claimer''s session: a transaction pooler is in the way')::bool END
