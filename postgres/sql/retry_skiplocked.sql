-- Records failures of leased jobs whose lease (id, token) is still current:
-- attempt + 1, the error kept, run_at = now() + delay on the database
-- clock; dead once attempt + 1 reaches max_attempts or when asked. A
-- snooze only reschedules: attempt and last_error stay.
-- The state test is a CASE so that no partial index serves the statement
-- (see complete_advisory.sql).
UPDATE {{table "jobs"}} AS t
SET attempt = t.attempt + CASE WHEN r.snooze THEN 0 ELSE 1 END,
    run_at = now() + r.delay_us * interval '1 microsecond',
    last_error = CASE WHEN r.snooze THEN t.last_error ELSE r.error END,
    state = CASE WHEN r.snooze THEN 'ready' WHEN r.dead OR t.attempt + 1 >= t.max_attempts THEN 'dead' ELSE 'ready' END,
    claim_token = NULL,
    claimed_until = NULL
FROM unnest($1::int8[], $2::int8[], $3::int8[], $4::text[], $5::bool[], $6::bool[]) AS r(id, token, delay_us, error, dead, snooze)
WHERE t.id = r.id AND t.claim_token = r.token AND CASE t.state WHEN 'claimed' THEN true END
RETURNING t.id
