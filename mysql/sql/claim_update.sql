-- Step 3, same transaction: the locked rows become this claim's, with its
-- token and the lease end computed in step 2. By primary key only, and only
-- rows still ready and due: the statement, not the lock before it, is what
-- makes a row this claim's, so a second claimer handed the same rows (a
-- SKIP LOCKED that locked nothing) changes none of them. The claim returns
-- only rows this changed: all it locked when it changed as many rows as
-- it locked, otherwise those read back by token (claim_read.sql).
UPDATE {{table "jobs"}}
SET state = 'claimed', claim_token = ?, claimed_until = CAST(? AS DATETIME(6))
WHERE id IN ({{params .N}})
  AND state = 'ready' AND run_at <= UTC_TIMESTAMP(6)
