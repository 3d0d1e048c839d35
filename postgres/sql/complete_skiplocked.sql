-- Completes leased jobs: deletes those whose lease (id, token) is still
-- current. Jobs whose lease was lost are left alone and not returned.
-- The state test is a CASE so that no partial index serves the statement
-- (see complete_advisory.sql).
DELETE FROM {{table "jobs"}} AS t
USING unnest($1::int8[], $2::int8[]) AS l(id, token)
WHERE t.id = l.id AND t.claim_token = l.token AND CASE t.state WHEN 'claimed' THEN true END
RETURNING t.id
