-- The SKIP LOCKED claimer's work for 100 jobs, as plain SQL: a claim that
-- marks the rows claimed (its own transaction), then their delete.
WITH c AS MATERIALIZED (
    SELECT id FROM ceiling_jobs
    WHERE queue = 'bench' AND state = 'ready' AND run_at <= now()
    ORDER BY priority, run_at, id LIMIT 100 FOR UPDATE SKIP LOCKED),
u AS (
    UPDATE ceiling_jobs AS t
    SET state = 'claimed', claim_token = 1, claimed_until = now() + interval '30 seconds'
    FROM c WHERE t.id = c.id
    RETURNING t.id, t.payload)
SELECT array_agg(id) AS ids FROM u \gset
DELETE FROM ceiling_jobs WHERE id = ANY(:ids::int8[]) AND state = 'claimed';
