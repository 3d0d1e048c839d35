-- Puts held jobs back as they were: same run_at, no attempt spent. ?1 is a
-- JSON object of {"token": [id, …]} (leasesJSON).
UPDATE {{table "jobs"}} AS j
SET state = 'ready',
    claim_token = NULL,
    claimed_until = NULL
FROM (SELECT i.value AS id, CAST(g.key AS INTEGER) AS token
      FROM json_each(?1) AS g, json_each(g.value) AS i) AS l
WHERE j.id = l.id
  AND j.claim_token = l.token
  AND j.state = 'claimed'
RETURNING id
