-- The queues that have jobs, for a rescue of all of them: a loose scan of
-- the claim index's first column.
SELECT DISTINCT queue
FROM {{table "jobs"}} FORCE INDEX ({{ident "jobs_claim"}})
