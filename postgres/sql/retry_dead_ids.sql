-- Revives dead jobs $2 of queue $1: ready now, attempt 0, last_error kept.
-- The ids join on the primary key (see complete_advisory.sql).
UPDATE {{table "jobs"}} AS t
SET state = 'ready', attempt = 0, run_at = now()
FROM unnest($2::int8[]) AS k(id)
WHERE t.id = k.id AND t.queue = $1 AND CASE t.state WHEN 'dead' THEN true END
RETURNING t.id
