-- Renews leases whose (id, token) is still current to now() + $3 µs.
-- The state test is a CASE so that no partial index serves the statement
-- (see complete_advisory.sql).
UPDATE {{table "jobs"}} AS t
SET claimed_until = now() + $3::int8 * interval '1 microsecond'
FROM unnest($1::int8[], $2::int8[]) AS l(id, token)
WHERE t.id = l.id AND t.claim_token = l.token AND CASE t.state WHEN 'claimed' THEN true END
RETURNING t.id
