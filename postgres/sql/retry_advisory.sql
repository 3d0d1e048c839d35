-- Records failures of advisory-held jobs: attempt + 1, the error kept,
-- run_at = now() + delay on the database clock; dead once attempt + 1
-- reaches max_attempts or when asked; a snooze only reschedules (attempt
-- and last_error stay). Committed before unlock.sql runs.
-- The state test is a CASE so that no partial index serves the statement
-- (see complete_advisory.sql).
-- The session guard (session.sql): $6 is the claimer's mark on its
-- session; run in any other session (a transaction pooler handed the
-- statement to another server connection) the statement fails before it
-- takes, checks or releases a lock.
UPDATE {{table "jobs"}} AS t
SET attempt = t.attempt + CASE WHEN r.snooze THEN 0 ELSE 1 END,
    run_at = now() + r.delay_us * interval '1 microsecond',
    last_error = CASE WHEN r.snooze THEN t.last_error ELSE r.error END,
    state = CASE WHEN r.snooze THEN 'ready' WHEN r.dead OR t.attempt + 1 >= t.max_attempts THEN 'dead' ELSE 'ready' END
FROM unnest($1::int8[], $2::int8[], $3::text[], $4::bool[], $5::bool[]) AS r(id, delay_us, error, dead, snooze)
WHERE t.id = r.id AND CASE t.state WHEN 'ready' THEN true END
  AND CASE WHEN current_setting('dbq.claimer', true) = $6::text THEN true
         ELSE ('dbq: postgres: server process ' || pg_backend_pid()
               || ' is not the advisory claimer''s session: a transaction pooler is in the way')::bool END
RETURNING t.id
