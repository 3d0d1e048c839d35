-- A completed job leaves the table: by primary key, and only while the
-- claim is the lease's (state and token).
DELETE FROM {{table "jobs"}}
WHERE id IN ({{params .N}})
  AND state = 'claimed'
  AND claim_token = CASE id{{range rows .N}} WHEN ? THEN ?{{end}} END
