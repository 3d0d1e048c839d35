-- delete: the end of an export batch that moved its jobs: delete jobs $1,
-- in the batch's transaction, which holds their row and advisory locks.
DELETE FROM {{table "jobs"}} WHERE id = ANY($1::int8[])
