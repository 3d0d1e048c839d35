-- Renew the leases: now + lease on the database clock.
UPDATE {{.Jobs}}
SET claimed_until = DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND)
WHERE id IN ({{.List}})
  AND state = 'claimed'
  AND claim_token = CASE id{{range .Rows}} WHEN ? THEN ?{{end}} END
