-- abandon: move every job claimed under @token back to jobs as it was. Run
-- after a claim whose result was lost (context cancelled or connection cut
-- while its rows were on the way), so an interrupted claim leaves no claim
-- behind. It waits for rows still locked by that claim rather than skip
-- them.
DELETE FROM {{table "jobs_inflight"}} WITH (ROWLOCK)
OUTPUT deleted.id, deleted.queue, deleted.kind, deleted.payload, deleted.priority, deleted.run_at,
       deleted.attempt, deleted.max_attempts, 'ready',
       deleted.last_error, deleted.dedupe_key, deleted.created_at
  INTO {{table "jobs"}} (id, queue, kind, payload, priority, run_at,
       attempt, max_attempts, state,
       last_error, dedupe_key, created_at)
WHERE claim_token = @token;
