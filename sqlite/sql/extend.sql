-- Renews held leases to now + ?2 µs. ?1 is a JSON object of
-- {"token": [id, …]} (leasesJSON).
UPDATE {{table "jobs"}} AS j
SET claimed_until = (CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000) + ?2
FROM (SELECT i.value AS id, CAST(g.key AS INTEGER) AS token
      FROM json_each(?1) AS g, json_each(g.value) AS i) AS l
WHERE j.id = l.id
  AND j.claim_token = l.token
  AND j.state = 'claimed'
RETURNING id
