-- jobs: list at most @limit stored jobs with id > @after in id order, ready,
-- scheduled and dead ones from jobs and held ones from jobs_inflight (state
-- claimed, with token and lease), whichever strategy claimed them. @queue,
-- @state and @kind keep only that queue, state or kind; '' keeps all
-- (none is ever empty: a job with no kind is kept by '' alone). OPTION
-- (RECOMPILE) plans each call for its values, so an unused filter costs
-- nothing and a used one seeks. A job that moves between the tables while
-- they are read may be listed in either state, or twice; the caller drops
-- the second.
SELECT TOP (@limit) j.id, j.queue, j.kind, j.payload, j.priority, j.run_at, j.attempt, j.max_attempts,
       j.state, j.claim_token, j.claimed_until, j.last_error, j.dedupe_key, j.created_at
FROM (
    SELECT id, queue, kind, payload, priority, run_at, attempt, max_attempts, state,
           CAST(NULL AS BIGINT) AS claim_token, CAST(NULL AS DATETIME2(6)) AS claimed_until,
           last_error, dedupe_key, created_at
    FROM {{table "jobs"}}
    UNION ALL
    SELECT id, queue, kind, payload, priority, run_at, attempt, max_attempts, 'claimed',
           claim_token, claimed_until, last_error, dedupe_key, created_at
    FROM {{table "jobs_inflight"}}
) AS j
WHERE j.id > @after AND (@queue = '' OR j.queue = @queue) AND (@state = '' OR j.state = @state)
  AND (@kind = '' OR j.kind = @kind)
ORDER BY j.id
OPTION (RECOMPILE);
