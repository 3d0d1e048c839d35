-- The slow path of Complete, Retry, Release and Extend, taken only when the
-- one-statement fast path matched fewer rows than the batch has leases:
-- in a READ COMMITTED transaction, lock the batch's held rows by primary
-- key (waiting, briefly, for a claim or rescue looking at one of them) and
-- read their tokens, to tell the leases still held from the lost ones.
SELECT id, claim_token
FROM {{table "jobs"}} FORCE INDEX (PRIMARY)
WHERE id IN ({{params .N}}) AND state = 'claimed'
FOR UPDATE
