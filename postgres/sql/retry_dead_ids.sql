-- Revives dead jobs $2 of queue $1: ready now, attempt 0, last_error kept.
UPDATE {{jobs}}
SET state = 'ready', attempt = 0, run_at = now()
WHERE id = ANY($2::int8[]) AND queue = $1 AND state = 'dead'
RETURNING id
