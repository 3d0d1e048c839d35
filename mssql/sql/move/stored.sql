-- stored: the stored jobs with the (queue, dedupe_key) of the rows of the
-- VALUES list, found through jobs_dedupe: from jobs, or from jobs_inflight
-- (state claimed) for a job someone holds.
SELECT j.id, j.queue, j.kind, j.payload, j.priority, j.run_at, j.attempt, j.max_attempts,
       j.state, j.last_error, j.dedupe_key, j.created_at
FROM {{table "jobs_dedupe"}} AS d WITH (FORCESEEK)
INNER JOIN (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}(@q{{$i}}, @k{{$i}}){{end}}) AS l (queue, dedupe_key) ON d.queue = l.queue AND d.dedupe_key = l.dedupe_key
INNER JOIN (
    SELECT id, queue, kind, payload, priority, run_at, attempt, max_attempts, state, last_error, dedupe_key, created_at
    FROM {{table "jobs"}}
    UNION ALL
    SELECT id, queue, kind, payload, priority, run_at, attempt, max_attempts, 'claimed', last_error, dedupe_key, created_at
    FROM {{table "jobs_inflight"}}
) AS j ON j.id = d.id;
