-- Step 4, same transaction: the rows step 3 changed, read back by their
-- new token (the transaction sees its own changes; a plain read, no
-- locks). By primary key only.
SELECT id, queue, payload, priority, run_at, attempt, max_attempts,
       last_error, dedupe_key, created_at, claimed_until
FROM {{.Jobs}} FORCE INDEX (PRIMARY)
WHERE id IN ({{.List}}) AND state = 'claimed' AND claim_token = ?
