-- RetryDead, step 2 (READ COMMITTED transaction): lock those of the ids
-- that are dead jobs of queue ?, by primary key.
SELECT id
FROM {{.Jobs}} FORCE INDEX (PRIMARY)
WHERE id IN ({{.List}}) AND queue = ? AND state = 'dead'
FOR UPDATE
