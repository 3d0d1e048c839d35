-- Step 2, in a READ COMMITTED transaction: lock the sampled candidates by
-- primary key only, skipping rows another transaction holds, and re-check
-- them against the primary (a candidate may be stale). Under READ COMMITTED
-- InnoDB releases the lock on a row that fails the WHERE at once, so the
-- transaction ends up holding exactly the rows this returns.
-- The pause probe is checked again here, on the primary and against the
-- latest committed row (step 1 may have read a replica, or run before the
-- pause): a nested subquery of a locking read is a plain consistent read
-- that locks nothing, so claimers never contend on the queues row.
-- lease_end is the new lease's end on the database clock.
-- This decides what the claim tries to take, not what it gets: a server
-- that accepts SKIP LOCKED but locks nothing (TiDB) hands the same rows to
-- every claimer here. claim_update.sql decides.
SELECT id, queue, kind, payload, priority, run_at, attempt, max_attempts,
       last_error, dedupe_key, created_at,
       DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND) AS lease_end
FROM {{table "jobs"}} FORCE INDEX (PRIMARY)
WHERE id IN ({{params .N}})
  AND queue = ? AND state = 'ready' AND run_at <= UTC_TIMESTAMP(6)
  AND NOT EXISTS (SELECT 1 FROM {{table "queues"}} WHERE queue = ? AND paused)
FOR UPDATE SKIP LOCKED
