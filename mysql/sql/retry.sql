-- A failed run: attempt + 1, run again at now + delay (database clock), the
-- error kept; dead when marked so or out of attempts. Per row, the first
-- CASE gives its mode: 'retry', 'dead' (marked dead) or 'snooze' (run again
-- at now + delay, spending no attempt: attempt and last_error stay, and the
-- job is ready whatever its attempts). A snoozed row's error parameter is
-- NULL, which keeps last_error, and its increment 0.
-- state is assigned first, from the attempt count before this update, and
-- last_error before attempt (MySQL evaluates single-table assignments left
-- to right; MariaDB's SIMULTANEOUS_ASSIGNMENT mode reads old values
-- throughout: same result). Times are DATE_ADD(…, INTERVAL … MICROSECOND),
-- never "+ INTERVAL (…)", which TiDB parses as the INTERVAL() function.
UPDATE {{table "jobs"}}
SET state = CASE (CASE id{{range rows .N}} WHEN ? THEN ?{{end}} END)
                WHEN 'snooze' THEN 'ready'
                WHEN 'dead' THEN 'dead'
                ELSE IF(attempt + 1 >= max_attempts, 'dead', 'ready')
            END,
    run_at = DATE_ADD(UTC_TIMESTAMP(6), INTERVAL CASE id{{range rows .N}} WHEN ? THEN ?{{end}} END MICROSECOND),
    last_error = COALESCE(CASE id{{range rows .N}} WHEN ? THEN ?{{end}} END, last_error),
    attempt = attempt + (CASE id{{range rows .N}} WHEN ? THEN ?{{end}} END),
    claim_token = NULL,
    claimed_until = NULL
WHERE id IN ({{params .N}})
  AND state = 'claimed'
  AND claim_token = CASE id{{range rows .N}} WHEN ? THEN ?{{end}} END
