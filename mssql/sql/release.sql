-- release: move the held jobs named by the (id, token) rows of the VALUES
-- list back to jobs as they were: ready, same run_at, no attempt spent. One
-- autocommit statement; returns the ids moved. FORCESEEK: each lease by its
-- key, as in complete.sql.
DELETE f
OUTPUT deleted.id, deleted.queue, deleted.kind, deleted.payload, deleted.priority, deleted.run_at,
       deleted.attempt, deleted.max_attempts, 'ready',
       deleted.last_error, deleted.dedupe_key, deleted.created_at
  INTO {{table "jobs"}} (id, queue, kind, payload, priority, run_at,
       attempt, max_attempts, state,
       last_error, dedupe_key, created_at)
OUTPUT deleted.id
FROM {{table "jobs_inflight"}} AS f WITH (ROWLOCK, FORCESEEK)
INNER JOIN (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}(@i{{$i}}, @t{{$i}}){{end}}) AS l (id, token) ON f.id = l.id AND f.claim_token = l.token;
