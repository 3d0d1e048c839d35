-- Gives leased jobs back, attempt unchanged, when their lease (id, token)
-- is still current. (Advisory claims are released by unlock.sql alone.)
-- The state test is a CASE so that no partial index serves the statement
-- (see complete_advisory.sql).
UPDATE {{table "jobs"}} AS t
SET state = 'ready', claim_token = NULL, claimed_until = NULL
FROM unnest($1::int8[], $2::int8[]) AS l(id, token)
WHERE t.id = l.id AND t.claim_token = l.token AND CASE t.state WHEN 'claimed' THEN true END
RETURNING t.id
