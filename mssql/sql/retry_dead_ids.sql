-- retry_dead_ids: make the dead jobs of queue @queue named by the (id)
-- rows of the VALUES list ready now, with attempt 0 and last_error kept;
-- return the ids revived. Jobs of other queues, and jobs not dead, are
-- left alone. One autocommit statement; FORCESEEK finds each job by id.
UPDATE j
SET state = 'ready', attempt = 0, run_at = SYSUTCDATETIME()
OUTPUT inserted.id
FROM {{table "jobs"}} AS j WITH (ROWLOCK, FORCESEEK)
INNER JOIN (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}(@i{{$i}}){{end}}) AS l (id) ON j.id = l.id
WHERE j.queue = @queue AND j.state = 'dead';
