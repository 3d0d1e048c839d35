-- Step 3, same transaction: the locked rows become this claim's, with its
-- token and a lease of ? microseconds on the database clock. By primary key
-- only, and only rows still ready and due: the statement, not the lock
-- before it, is what makes a row this claim's, so a second claimer handed
-- the same rows (a SKIP LOCKED that locked nothing) changes none of them.
-- The claim returns the rows this changed, read back by token
-- (claim_read.sql), and nothing else.
UPDATE {{.Jobs}}
SET state = 'claimed', claim_token = ?,
    claimed_until = DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND)
WHERE id IN ({{.List}})
  AND state = 'ready' AND run_at <= UTC_TIMESTAMP(6)
