-- Deletes the jobs of ?1 (a JSON array of ids) that no one holds. Inside
-- the write transaction no claim can start or end meanwhile.
DELETE FROM {{table "jobs"}}
WHERE id IN (SELECT value FROM json_each(?1))
  AND state <> 'claimed'
RETURNING id
