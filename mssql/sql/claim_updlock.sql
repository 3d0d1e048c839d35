-- claim (Strategy UpdLock, for comparison): the dequeue of Hangfire, Rebus
-- and NServiceBus. The first @n ready jobs of @queue in claim order that no
-- one else has locked are update-locked (UPDLOCK), locked rows are skipped
-- (READPAST), locks stay on rows (ROWLOCK), and the read locks even under
-- read committed snapshot (READCOMMITTEDLOCK, as NServiceBus.SqlServer
-- added in 2024, PR #1277, and Rebus.SqlServer issue #35 asks); the same
-- statement moves them into jobs_inflight under lease token @token and
-- returns them. A paused queue (its row in queues says so: one primary-key
-- probe, in the same statement) yields nothing.
WITH picked AS (
    SELECT TOP (@n) id, queue, kind, payload, priority, run_at,
           attempt, max_attempts, last_error, dedupe_key, created_at
    FROM {{table "jobs"}} WITH (UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK)
    WHERE queue = @queue AND state = 'ready' AND run_at <= SYSUTCDATETIME()
      AND NOT EXISTS (SELECT 1 FROM {{table "queues"}} AS p
                      WHERE p.queue = @queue AND p.paused = 1)
    ORDER BY priority, run_at, id
)
DELETE FROM picked
OUTPUT deleted.id, deleted.queue, deleted.kind, deleted.payload, deleted.priority, deleted.run_at,
       deleted.attempt, deleted.max_attempts, deleted.last_error, deleted.dedupe_key, deleted.created_at,
       @token, DATEADD(millisecond, @lease_ms, DATEADD(second, @lease_s, SYSUTCDATETIME()))
  INTO {{table "jobs_inflight"}} (id, queue, kind, payload, priority, run_at,
       attempt, max_attempts, last_error, dedupe_key, created_at,
       claim_token, claimed_until)
OUTPUT deleted.id, deleted.queue, deleted.kind, deleted.payload, deleted.priority, deleted.run_at,
       deleted.attempt, deleted.max_attempts, deleted.last_error, deleted.dedupe_key, deleted.created_at,
       DATEADD(millisecond, @lease_ms, DATEADD(second, @lease_s, SYSUTCDATETIME()));
