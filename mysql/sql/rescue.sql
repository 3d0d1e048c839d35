-- Lease expiry, step 3: the holder died or stalled, which counts as a failed
-- run. Only rows still held and still expired: the UPDATE, not the lock
-- before it, decides (a server whose SKIP LOCKED locks nothing hands two
-- rescuers the same rows; the second changes none), and the pass counts
-- the rows it changed. state is assigned first, from the attempt count
-- before this update (MySQL evaluates single-table assignments left to
-- right; MariaDB's SIMULTANEOUS_ASSIGNMENT mode reads old values
-- throughout: same result).
UPDATE {{table "jobs"}}
SET state = IF(attempt + 1 >= max_attempts, 'dead', 'ready'),
    attempt = attempt + 1,
    last_error = 'dbq: lease expired: the holder died or stalled without Extend',
    claim_token = NULL,
    claimed_until = NULL
WHERE id IN ({{params .N}})
  AND state = 'claimed' AND claimed_until < UTC_TIMESTAMP(6)
