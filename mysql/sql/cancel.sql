-- Cancel, step 2, same transaction: delete the rows step 1 locked, by
-- primary key.
DELETE FROM {{.Jobs}}
WHERE id IN ({{.List}}) AND state <> 'claimed'
