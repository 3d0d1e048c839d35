-- Renew the leases: now + lease on the database clock.
UPDATE {{table "jobs"}}
SET claimed_until = DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND)
WHERE id IN ({{params .N}})
  AND state = 'claimed'
  AND claim_token = CASE id{{range rows .N}} WHEN ? THEN ?{{end}} END
