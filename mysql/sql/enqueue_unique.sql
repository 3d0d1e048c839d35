-- One job, unless its queue holds a job with its dedupe key. A collision
-- takes the ON DUPLICATE KEY UPDATE branch, which raises nothing (unlike a
-- plain INSERT) and hides no other error (unlike INSERT IGNORE, which turns
-- data errors into warnings). The branch changes no column: it only
-- evaluates LAST_INSERT_ID(-id), so that the statement's insert id is the
-- existing job's id negated. Its sign tells a stored job (positive, the new
-- AUTO_INCREMENT value) from an existing one, whatever CLIENT_FOUND_ROWS
-- makes of the affected-row count, and the id comes from the row the
-- statement found and locked: there is no second look-up for the job to
-- vanish before. The only unique key a new row can collide on is
-- jobs_dedupe (queue, dedupe_key); id is AUTO_INCREMENT.
INSERT INTO {{table "jobs"}}
    (queue, kind, payload, priority, run_at, max_attempts, dedupe_key, created_at)
VALUES
    (?, ?, ?, ?, COALESCE(CAST(? AS DATETIME(6)), DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND)), ?, ?, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE id = IF(LAST_INSERT_ID(-id), id, id)
