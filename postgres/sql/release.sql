-- Gives leased jobs back, attempt unchanged, when their lease (id, token)
-- is still current. (Advisory claims are released by unlock.sql alone.)
UPDATE {{jobs}} AS t
SET state = 'ready', claim_token = NULL, claimed_until = NULL
FROM unnest($1::int8[], $2::int8[]) AS l(id, token)
WHERE t.id = l.id AND t.claim_token = l.token AND t.state = 'claimed'
RETURNING t.id
