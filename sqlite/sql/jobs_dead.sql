-- Lists dead jobs of queue ?1 after id ?2 in id order, at most ?3: a range
-- of the partial index jobs_dead (queue, id) WHERE state = 'dead', so
-- ready and held jobs, however many, cost nothing.
SELECT id, queue, payload, priority, run_at, attempt, max_attempts, state,
       claim_token, claimed_until, last_error, dedupe_key, created_at
FROM {{table "jobs"}}
WHERE queue = ?1 AND state = 'dead' AND id > ?2
ORDER BY id
LIMIT ?3
