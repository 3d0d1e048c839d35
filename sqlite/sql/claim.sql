-- Claims up to ?4 ready jobs of queue ?3 in (priority, run_at, id) order:
-- the subquery is a range scan of the partial claim index. ?1 is the
-- claim's token, ?2 the lease in µs. Runs inside BEGIN IMMEDIATE, so no
-- other writer can take the same rows. A paused queue (one primary-key
-- probe of the queues table) yields nothing. The limit is written ?4 + 0,
-- not ?4: SQLite reads a bare bound LIMIT as a planner hint and then
-- re-prepares the statement whenever n changes, which cost more than the
-- claim itself; the index already gives the order, so the hint buys
-- nothing. The queue and the token are the caller's: not returned.
UPDATE {{table "jobs"}}
SET state = 'claimed',
    claim_token = ?1,
    claimed_until = (CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000) + ?2
WHERE id IN (
    SELECT id FROM {{table "jobs"}}
    WHERE queue = ?3
      AND state = 'ready'
      AND run_at <= (CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000)
      AND NOT EXISTS (SELECT 1 FROM {{table "queues"}} WHERE queue = ?3 AND paused)
    ORDER BY priority, run_at, id
    LIMIT ?4 + 0)
RETURNING id, kind, payload, priority, run_at, attempt, max_attempts,
          claimed_until, last_error, dedupe_key, created_at
