-- Back to ready as it was: no attempt spent, run_at kept.
UPDATE {{.Jobs}}
SET state = 'ready', claim_token = NULL, claimed_until = NULL
WHERE id IN ({{.List}})
  AND state = 'claimed'
  AND claim_token = CASE id{{range .Rows}} WHEN ? THEN ?{{end}} END
