-- The floor (bench/floor.go): take 100 ready jobs and delete them, in one
-- statement, recording no claim.
DELETE FROM ceiling_jobs WHERE id IN (
    SELECT id FROM ceiling_jobs
    WHERE queue = 'bench' AND state = 'ready' AND run_at <= now()
    ORDER BY priority, run_at, id LIMIT 100 FOR UPDATE SKIP LOCKED);
