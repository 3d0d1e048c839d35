-- retry: move the held jobs named by the (id, token) rows of the VALUES
-- list back to jobs with attempt + 1, run_at = now + delay and the error
-- kept; a job whose attempts are spent, or whose row says dead = 1, becomes
-- dead. A row that says snooze = 1 only reschedules its job: ready at now +
-- delay, attempt and last_error as they were, dead and error ignored. One
-- autocommit statement; returns the ids moved, which keep their ids (no
-- identity). FORCESEEK: each lease by its key, as in complete.sql.
DELETE f
OUTPUT deleted.id, deleted.queue, deleted.kind, deleted.payload, deleted.priority,
       DATEADD(millisecond, l.delay_ms, DATEADD(second, l.delay_s, SYSUTCDATETIME())),
       CASE WHEN l.snooze = 1 THEN deleted.attempt ELSE deleted.attempt + 1 END,
       deleted.max_attempts,
       CASE WHEN l.snooze = 1 THEN 'ready'
            WHEN l.dead = 1 OR deleted.attempt + 1 >= deleted.max_attempts THEN 'dead'
            ELSE 'ready' END,
       CASE WHEN l.snooze = 1 THEN deleted.last_error ELSE l.error END,
       deleted.dedupe_key, deleted.created_at
  INTO {{table "jobs"}} (id, queue, kind, payload, priority,
       run_at,
       attempt,
       max_attempts,
       state,
       last_error,
       dedupe_key, created_at)
OUTPUT deleted.id
FROM {{table "jobs_inflight"}} AS f WITH (ROWLOCK, FORCESEEK)
INNER JOIN (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}(@i{{$i}}, @t{{$i}}, @ds{{$i}}, @dm{{$i}}, @dd{{$i}}, @sn{{$i}}, @e{{$i}}){{end}}) AS l (id, token, delay_s, delay_ms, dead, snooze, error)
    ON f.id = l.id AND f.claim_token = l.token;
