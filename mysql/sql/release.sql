-- Back to ready as it was: no attempt spent, run_at kept.
UPDATE {{table "jobs"}}
SET state = 'ready', claim_token = NULL, claimed_until = NULL
WHERE id IN ({{params .N}})
  AND state = 'claimed'
  AND claim_token = CASE id{{range rows .N}} WHEN ? THEN ?{{end}} END
