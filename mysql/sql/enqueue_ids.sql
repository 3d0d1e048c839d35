-- The ids of one INSERT in innodb_autoinc_lock_mode 2, where the manual
-- does not promise that one statement's values are consecutive, only that
-- they increase: from LAST_INSERT_ID() up, in id order, the rows carrying
-- the batch's marker. A primary-key range scan that stops at the LIMIT.
SELECT id
FROM {{table "jobs"}} FORCE INDEX (PRIMARY)
WHERE id >= ? AND claim_token = ?
ORDER BY id
LIMIT ?
