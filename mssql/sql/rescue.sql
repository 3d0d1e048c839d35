-- rescue: move up to @batch jobs whose lease has expired back to jobs. The
-- run is counted as a failed attempt, as River and Oban count it, so a job
-- that kills its workers ends dead instead of looping; the job is ready at
-- once. Rows another statement holds are skipped (READPAST), not waited on;
-- READCOMMITTEDLOCK lets READPAST run under read committed snapshot too.
DELETE TOP (@batch) FROM {{table "jobs_inflight"}} WITH (READPAST, ROWLOCK, READCOMMITTEDLOCK)
OUTPUT deleted.id, deleted.queue, deleted.payload, deleted.priority, SYSUTCDATETIME(),
       deleted.attempt + 1, deleted.max_attempts,
       CASE WHEN deleted.attempt + 1 >= deleted.max_attempts THEN 'dead' ELSE 'ready' END,
       @error, deleted.dedupe_key, deleted.created_at
  INTO {{table "jobs"}} (id, queue, payload, priority, run_at,
       attempt, max_attempts,
       state,
       last_error, dedupe_key, created_at)
WHERE claimed_until < SYSUTCDATETIME();
