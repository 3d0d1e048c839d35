-- Records failures of advisory-held jobs: attempt + 1, the error kept,
-- run_at = now() + delay on the database clock; dead once attempt + 1
-- reaches max_attempts or when asked. Committed before unlock.sql runs.
UPDATE {{jobs}} AS t
SET attempt = t.attempt + 1,
    run_at = now() + r.delay_us * interval '1 microsecond',
    last_error = r.error,
    state = CASE WHEN r.dead OR t.attempt + 1 >= t.max_attempts THEN 'dead' ELSE 'ready' END
FROM unnest($1::int8[], $2::int8[], $3::text[], $4::bool[]) AS r(id, delay_us, error, dead)
WHERE t.id = r.id AND t.state = 'ready'
RETURNING t.id
