-- Revives up to 1000 dead jobs of queue $1 in id order (jobs_dead): ready
-- now, attempt 0, last_error kept. Run until it returns fewer.
UPDATE {{table "jobs"}} AS t
SET state = 'ready', attempt = 0, run_at = now()
FROM (
    SELECT id FROM {{table "jobs"}}
    WHERE queue = $1 AND state = 'dead'
    ORDER BY queue, id
    LIMIT 1000
    FOR UPDATE SKIP LOCKED
) AS x
WHERE t.id = x.id AND t.state = 'dead'
RETURNING t.id
