-- delete: the end of an export batch that moved its jobs, in the batch's
-- transaction. Only jobs still unheld: the DELETE, not the lock, decides.
DELETE FROM {{table "jobs"}}
WHERE id IN ({{params .N}}) AND state IN ('ready', 'dead')
