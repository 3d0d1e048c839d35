-- Renews held leases to now + ?2 µs. ?1 is a JSON array of [id, token]
-- pairs.
UPDATE {{table "jobs"}} AS j
SET claimed_until = (CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000) + ?2
FROM (SELECT value ->> 0 AS id, value ->> 1 AS token FROM json_each(?1)) AS l
WHERE j.id = l.id
  AND j.claim_token = l.token
  AND j.state = 'claimed'
RETURNING id
