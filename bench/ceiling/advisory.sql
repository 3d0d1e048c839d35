-- The advisory claimer's work for 100 jobs, as plain SQL: lock rows along
-- the claim index with session advisory locks (a plain filter here, where
-- dbq walks each priority), read them again (the post-check), delete them,
-- then unlock them.
SELECT array_agg(id) AS ids FROM (
    SELECT id FROM ceiling_jobs
    WHERE queue = 'bench' AND state = 'ready' AND run_at <= now()
      AND pg_try_advisory_lock(1, id::int)
    ORDER BY priority, run_at, id LIMIT 100) AS s \gset
SELECT id, payload FROM ceiling_jobs WHERE id = ANY(:ids::int8[]) AND state = 'ready';
DELETE FROM ceiling_jobs WHERE id = ANY(:ids::int8[]);
SELECT count(pg_advisory_unlock(1, k::int)) FROM unnest(:ids::int8[]) AS k;
