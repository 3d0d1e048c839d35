-- The post-check (SEEDS 000, mandatory): run on the claiming connection
-- right after claim_advisory.sql, as a statement of its own. A job that was
-- completed, retried or made dead by another claimer between the claim's
-- snapshot and its lock is gone or no longer ready here, because that
-- claimer unlocked only after its change committed. Only the rows returned
-- here are kept, and they are read fresh.
SELECT id, queue, payload, priority, run_at, attempt, max_attempts,
       last_error, dedupe_key, created_at
FROM {{jobs}}
WHERE id = ANY($1::int8[]) AND state = 'ready' AND run_at <= now()
