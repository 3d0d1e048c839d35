-- claim (Strategy DeleteTop, a randomized top-X DELETE): one autocommit statement moves up
-- to @n ready jobs of @queue from jobs into jobs_inflight under lease token
-- @token, and returns them.
--
-- The pick is random among the first @window ready rows in claim order, so
-- concurrent claimers rarely pick the same row. The inner read skips rows
-- other claimers are deleting (READPAST) and takes short-lived shared locks
-- even under read committed snapshot (READCOMMITTEDLOCK), so it neither
-- waits on them nor returns a row version another claimer already holds.
-- The DELETE fails at once with error 1222 instead of waiting when a picked
-- row is locked all the same (NOWAIT); the caller retries with a new pick.
-- Table hints cover only the reference they sit on: each reference needs
-- its own. FORCESEEK makes the DELETE find its rows through the id index:
-- a scan, which the optimizer prefers for a small table, would take update
-- locks on every row it passes and fail with 1222 on any row locked by
-- anyone (another claim, an uncommitted enqueue). The target is therefore
-- named in FROM, where FORCESEEK is allowed (as in Hangfire's dequeue). The
-- outer WHERE checks state and run_at again because a row can be claimed
-- and retried with a later run_at between the read and the delete.
-- A paused queue (its row in queues says so: one primary-key probe, in the
-- same statement) yields nothing.
DELETE TOP (@n) j
OUTPUT deleted.id, deleted.queue, deleted.kind, deleted.payload, deleted.priority, deleted.run_at,
       deleted.attempt, deleted.max_attempts, deleted.last_error, deleted.dedupe_key, deleted.created_at,
       @token, DATEADD(millisecond, @lease_ms, DATEADD(second, @lease_s, SYSUTCDATETIME()))
  INTO {{table "jobs_inflight"}} (id, queue, kind, payload, priority, run_at,
       attempt, max_attempts, last_error, dedupe_key, created_at,
       claim_token, claimed_until)
OUTPUT deleted.id, deleted.queue, deleted.kind, deleted.payload, deleted.priority, deleted.run_at,
       deleted.attempt, deleted.max_attempts, deleted.last_error, deleted.dedupe_key, deleted.created_at,
       DATEADD(millisecond, @lease_ms, DATEADD(second, @lease_s, SYSUTCDATETIME()))
FROM {{table "jobs"}} AS j WITH (NOWAIT, ROWLOCK, FORCESEEK)
WHERE j.id IN (
        SELECT TOP (@n) r.id
        FROM (
            SELECT TOP (@window) id
            FROM {{table "jobs"}} WITH (READPAST, READCOMMITTEDLOCK)
            WHERE queue = @queue AND state = 'ready' AND run_at <= SYSUTCDATETIME()
              AND NOT EXISTS (SELECT 1 FROM {{table "queues"}} AS p
                              WHERE p.queue = @queue AND p.paused = 1)
            ORDER BY priority, run_at, id
        ) AS r
        ORDER BY CHECKSUM(NEWID())
    )
    AND j.state = 'ready' AND j.run_at <= SYSUTCDATETIME();
