-- Lists dead jobs of queue ?1 after id ?2 in id order, at most ?3, only
-- those of kind ?4 when it is not empty: a range of the partial index
-- jobs_dead (queue, id) WHERE state = 'dead', so ready and held jobs,
-- however many, cost nothing.
SELECT id, queue, kind, payload, priority, run_at, attempt, max_attempts, state,
       claim_token, claimed_until, last_error, dedupe_key, created_at
FROM {{table "jobs"}}
WHERE queue = ?1 AND state = 'dead' AND id > ?2
  AND (?4 = '' OR kind = ?4)
ORDER BY id
LIMIT ?3
