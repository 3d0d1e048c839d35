-- Step 3, same transaction: the locked rows become this claim's, with its
-- token and the lease end computed in step 2. By primary key only.
UPDATE {{.Jobs}}
SET state = 'claimed', claim_token = ?, claimed_until = CAST(? AS DATETIME(6))
WHERE id IN ({{.List}})
