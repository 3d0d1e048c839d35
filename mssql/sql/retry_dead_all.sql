-- retry_dead_all: make up to @batch dead jobs of queue @queue ready now,
-- with attempt 0 and last_error kept; return the ids revived. A seek on the
-- clustered key's (queue, state) prefix. The caller runs it until fewer
-- than @batch come back, so no statement touches many rows.
UPDATE TOP (@batch) {{table "jobs"}} WITH (ROWLOCK)
SET state = 'ready', attempt = 0, run_at = SYSUTCDATETIME()
OUTPUT inserted.id
WHERE queue = @queue AND state = 'dead';
