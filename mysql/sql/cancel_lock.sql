-- Cancel, step 1 (READ COMMITTED transaction): lock those of the ids that no
-- one holds, by primary key. It waits (briefly: innodb_lock_wait_timeout)
-- for a claim that is looking at one of them and then re-reads the row: a
-- job that claim took is claimed now and left alone; one it let go is
-- still ready and is cancelled.
SELECT id
FROM {{table "jobs"}} FORCE INDEX (PRIMARY)
WHERE id IN ({{params .N}}) AND state <> 'claimed'
FOR UPDATE
