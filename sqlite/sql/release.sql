-- Puts held jobs back as they were: same run_at, no attempt spent. ?1 is a
-- JSON array of [id, token] pairs.
UPDATE {{table "jobs"}} AS j
SET state = 'ready',
    claim_token = NULL,
    claimed_until = NULL
FROM (SELECT value ->> 0 AS id, value ->> 1 AS token FROM json_each(?1)) AS l
WHERE j.id = l.id
  AND j.claim_token = l.token
  AND j.state = 'claimed'
RETURNING id
