-- Deletes the held jobs named by ?1, a JSON object of {"token": [id, …]}
-- (leasesJSON). A lease that does not match a held job changes nothing and
-- is missing from the returned ids.
DELETE FROM {{table "jobs"}}
WHERE state = 'claimed'
  AND (id, claim_token) IN (
      SELECT i.value, CAST(g.key AS INTEGER)
      FROM json_each(?1) AS g, json_each(g.value) AS i)
RETURNING id
