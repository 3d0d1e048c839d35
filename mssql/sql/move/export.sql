-- export: up to @limit stored jobs with id > @after that the filter
-- selects (as in survey.sql), in id order, each update-locked until the
-- batch's transaction ends. Only jobs is read: a held job is in
-- jobs_inflight and belongs to its holder. Rows another statement has
-- locked — a claim taking them, another export — are skipped (READPAST),
-- not waited on; the update locks make UpdLock claimers and other exports
-- skip these rows, and a DeleteTop claim that picks one fails its NOWAIT
-- delete and picks again. ROWLOCK keeps the locks on rows (the table does
-- not escalate); READCOMMITTEDLOCK lets READPAST run under read committed
-- snapshot too. The dedupe key is the job's own column, the one
-- jobs_dedupe records for it.
SELECT TOP (@limit) j.id, j.queue, j.kind, j.payload, j.priority, j.run_at, j.attempt, j.max_attempts,
       j.state, j.last_error, j.dedupe_key, j.created_at
FROM {{table "jobs"}} AS j WITH (UPDLOCK, ROWLOCK, READPAST, READCOMMITTEDLOCK)
WHERE j.id > @after
  AND (@all_queues = 1 OR j.queue IN (SELECT v.queue FROM (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}(@q{{$i}}){{end}}) AS v (queue)))
  AND ((j.state = 'ready' AND j.run_at <= SYSUTCDATETIME() AND @ready = 1)
    OR (j.state = 'ready' AND j.run_at > SYSUTCDATETIME() AND @scheduled = 1)
    OR (j.state = 'dead' AND @dead = 1))
ORDER BY j.id;
