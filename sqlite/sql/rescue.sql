-- Gives back up to ?1 jobs whose lease has expired: their holder is dead or
-- too slow. Its token no longer matches, so it gets ErrLeaseLost. The run
-- that lost its lease counts as a failed attempt (as in River and Oban, and
-- every lease dialect of dbq): a job that keeps killing its workers ends
-- dead instead of looping. The job is ready at once, without backoff.
UPDATE {{table "jobs"}}
SET state = CASE WHEN attempt + 1 >= max_attempts THEN 'dead' ELSE 'ready' END,
    attempt = attempt + 1,
    last_error = 'dbq: lease expired: the holder died or stalled without Extend',
    claim_token = NULL,
    claimed_until = NULL
WHERE id IN (
    SELECT id FROM {{table "jobs"}}
    WHERE state = 'claimed'
      AND claimed_until < (CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000)
    ORDER BY claimed_until
    LIMIT ?1)
