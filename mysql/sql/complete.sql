-- A completed job leaves the table: by primary key, and only while the
-- claim is the lease's (state and token).
DELETE FROM {{.Jobs}}
WHERE id IN ({{.List}})
  AND state = 'claimed'
  AND claim_token = CASE id{{range .Rows}} WHEN ? THEN ?{{end}} END
