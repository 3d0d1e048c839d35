-- Cancel, step 2, same transaction: delete the rows step 1 locked, by
-- primary key.
DELETE FROM {{table "jobs"}}
WHERE id IN ({{params .N}}) AND state <> 'claimed'
