-- RetryDead, step 3, same transaction: the locked jobs are ready now with
-- attempt 0; last_error is kept for whoever looks at the job next.
UPDATE {{table "jobs"}}
SET state = 'ready', attempt = 0, run_at = UTC_TIMESTAMP(6), claim_token = NULL, claimed_until = NULL
WHERE id IN ({{params .N}}) AND state = 'dead'
