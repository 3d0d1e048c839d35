-- Step 4, same transaction, only when step 3 changed fewer rows than step 2
-- locked (its locks did not hold) or on TiDB (whose locks never hold, so
-- step 2's columns may be stale): the rows step 3 changed, read back by
-- their new token. The transaction sees its own changes; a plain read, no
-- locks. By primary key only.
SELECT id, queue, kind, payload, priority, run_at, attempt, max_attempts,
       last_error, dedupe_key, created_at, claimed_until
FROM {{table "jobs"}} FORCE INDEX (PRIMARY)
WHERE id IN ({{params .N}}) AND state = 'claimed' AND claim_token = ?
