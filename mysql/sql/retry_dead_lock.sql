-- RetryDead, step 2 (READ COMMITTED transaction): lock those of the ids
-- that are dead jobs of queue ?, by primary key.
SELECT id
FROM {{table "jobs"}} FORCE INDEX (PRIMARY)
WHERE id IN ({{params .N}}) AND queue = ? AND state = 'dead'
FOR UPDATE
