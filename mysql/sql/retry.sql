-- A failed run: attempt + 1, run again at now + delay (database clock), the
-- error kept; dead when marked so or out of attempts. state is assigned
-- first, from the attempt count before this update (MySQL evaluates
-- single-table assignments left to right; MariaDB's SIMULTANEOUS_ASSIGNMENT
-- mode reads old values throughout: same result).
UPDATE {{.Jobs}}
SET state = IF((CASE id{{range .Rows}} WHEN ? THEN ?{{end}} END) OR attempt + 1 >= max_attempts, 'dead', 'ready'),
    run_at = UTC_TIMESTAMP(6) + INTERVAL (CASE id{{range .Rows}} WHEN ? THEN ?{{end}} END) MICROSECOND,
    last_error = CASE id{{range .Rows}} WHEN ? THEN ?{{end}} END,
    attempt = attempt + 1,
    claim_token = NULL,
    claimed_until = NULL
WHERE id IN ({{.List}})
  AND state = 'claimed'
  AND claim_token = CASE id{{range .Rows}} WHEN ? THEN ?{{end}} END
