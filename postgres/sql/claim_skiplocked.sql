-- SKIP LOCKED claim (lease + token, as River and Oban do): takes up to $2
-- ready jobs of queue $1 in (priority, run_at, id) order from the claim
-- index, skipping rows another transaction has locked, and marks them
-- claimed with token $3 until now() + $4 µs. One autocommit statement, so
-- it holds no session state and works behind PgBouncer in transaction mode.
--
-- The candidates are read one priority at a time: prio walks the distinct
-- priorities of the queue's ready jobs in order (one index descent each)
-- and keeps those with a job due now, and each is read as its own range of
-- the claim index, (queue, priority, run_at <= now()). A single range in
-- (priority, run_at, id) order would pass every future job of a lower
-- priority number before reaching a due job of a higher one: a million
-- scheduled jobs ahead cost a million index entries per claim. The nested
-- loop runs lazily and the LIMIT stops it, so a priority's rows are locked
-- only when the ones before it did not fill the batch.
UPDATE {{jobs}} AS t
SET state = 'claimed',
    claim_token = $3,
    claimed_until = now() + $4::int8 * interval '1 microsecond'
FROM (
    WITH RECURSIVE prio(p) AS (
        SELECT (SELECT priority FROM {{jobs}}
                WHERE queue = $1 AND state = 'ready'
                ORDER BY priority LIMIT 1)
      UNION ALL
        SELECT (SELECT priority FROM {{jobs}}
                WHERE queue = $1 AND state = 'ready' AND priority > prio.p
                ORDER BY priority LIMIT 1)
        FROM prio
        WHERE prio.p IS NOT NULL
    )
    SELECT j.id
    FROM prio
    CROSS JOIN LATERAL (
        SELECT id
        FROM {{jobs}}
        WHERE queue = $1 AND state = 'ready' AND priority = prio.p AND run_at <= now()
        ORDER BY run_at, id
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    ) AS j
    WHERE prio.p IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM {{queues}} WHERE queue = $1 AND paused)
    LIMIT $2
) AS c
WHERE t.id = c.id
RETURNING t.id, t.queue, t.payload, t.priority, t.run_at, t.attempt, t.max_attempts,
          t.claimed_until, t.last_error, t.dedupe_key, t.created_at
