-- Deletes the held jobs named by ?1, a JSON array of [id, token] pairs.
-- A pair that does not match a held job changes nothing and is missing from
-- the returned ids.
DELETE FROM {{table "jobs"}}
WHERE state = 'claimed'
  AND (id, claim_token) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?1))
RETURNING id
