-- Lists jobs with id > $1 in id order, at most $2; with .Queue, only those
-- of queue $3; with .Kind, only those of kind $3, or $4 after a queue
-- (.KindParam); and with .State ("dead", "ready" or "claimed"), only those
-- in that state. Each combination is its own statement, with its own plan
-- (jobs_dead for a queue's dead jobs, the primary key otherwise); the dead
-- filter is a literal so that the planner can use the partial index. A
-- ready row whose advisory key a session holds (see stats.sql) is listed
-- as claimed, as Stats counts it held.
WITH held AS MATERIALIZED (
    SELECT DISTINCT l.classid, l.objid
    FROM pg_locks AS l
    WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
)
SELECT id, queue, payload, priority, run_at, attempt, max_attempts,
       CASE WHEN state = 'ready' AND held THEN 'claimed' ELSE state END,
       coalesce(claim_token, 0), claimed_until, coalesce(last_error, ''),
       coalesce(dedupe_key, ''), created_at, kind
FROM (
    SELECT j.*,
           EXISTS (SELECT 1 FROM held AS h
                   WHERE h.classid = j.tableoid AND h.objid = j.id::bit(32)::int4::oid) AS held
    FROM {{table "jobs"}} AS j
    WHERE j.id > $1{{if .Queue}} AND j.queue = $3{{end}}{{if .Kind}} AND j.kind = ${{.KindParam}}{{end}}{{if eq .State "dead"}} AND j.state = 'dead'{{end}}
) AS j
WHERE true{{if eq .State "ready"}} AND state = 'ready' AND NOT held{{else if eq .State "claimed"}} AND (state = 'claimed' OR state = 'ready' AND held){{end}}
ORDER BY id
LIMIT $2
