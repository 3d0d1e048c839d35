-- delete: the exported jobs of ?1, a JSON array of ids, when their batch
-- commits.
DELETE FROM {{table "jobs"}} WHERE id IN (SELECT value FROM json_each(?1))
