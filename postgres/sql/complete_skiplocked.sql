-- Completes leased jobs: deletes those whose lease (id, token) is still
-- current. Jobs whose lease was lost are left alone and not returned.
DELETE FROM {{jobs}} AS t
USING unnest($1::int8[], $2::int8[]) AS l(id, token)
WHERE t.id = l.id AND t.claim_token = l.token AND t.state = 'claimed'
RETURNING t.id
