-- Ends held jobs with a failure. ?1 is a JSON array of
-- [id, token, delay µs, error, dead, snooze] per job. A job whose runs are
-- spent, or marked dead, becomes dead (run_at then records when it died).
-- A snoozed job is ready again after its delay with attempt and last_error
-- as they were.
UPDATE {{table "jobs"}} AS j
SET attempt = CASE WHEN r.snooze THEN j.attempt ELSE j.attempt + 1 END,
    state = CASE WHEN r.snooze THEN 'ready'
                 WHEN r.dead OR j.attempt + 1 >= j.max_attempts THEN 'dead'
                 ELSE 'ready' END,
    run_at = (CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000)
             + CASE WHEN r.snooze THEN r.delay
                    WHEN r.dead OR j.attempt + 1 >= j.max_attempts THEN 0
                    ELSE r.delay END,
    last_error = CASE WHEN r.snooze THEN j.last_error ELSE r.error END,
    claim_token = NULL,
    claimed_until = NULL
FROM (SELECT value ->> 0 AS id, value ->> 1 AS token, value ->> 2 AS delay,
             value ->> 3 AS error, value ->> 4 AS dead, value ->> 5 AS snooze
      FROM json_each(?1)) AS r
WHERE j.id = r.id
  AND j.claim_token = r.token
  AND j.state = 'claimed'
RETURNING id
