-- SKIP LOCKED claim (lease + token, as River and Oban do): takes up to $2
-- ready jobs of queue $1 in (priority, run_at, id) order from the claim
-- index, skipping rows another transaction has locked, and marks them
-- claimed with token $3 until now() + $4 µs. One autocommit statement, so
-- it holds no session state and works behind PgBouncer in transaction mode.
UPDATE {{jobs}} AS t
SET state = 'claimed',
    claim_token = $3,
    claimed_until = now() + $4::int8 * interval '1 microsecond'
FROM (
    SELECT id
    FROM {{jobs}}
    WHERE queue = $1 AND state = 'ready' AND run_at <= now()
      AND NOT EXISTS (SELECT 1 FROM {{queues}} WHERE queue = $1 AND paused)
    ORDER BY priority, run_at, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
) AS c
WHERE t.id = c.id
RETURNING t.id, t.queue, t.payload, t.priority, t.run_at, t.attempt, t.max_attempts,
          t.claimed_until, t.last_error, t.dedupe_key, t.created_at
