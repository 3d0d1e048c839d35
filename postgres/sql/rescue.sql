-- Returns up to 1000 expired leases, oldest first. The run that lost its
-- lease counts as a failed attempt (as in River and Oban, and every lease
-- dialect of dbq): a job that keeps killing its workers ends dead instead
-- of looping. The job is ready at once, without backoff. SKIP LOCKED: rows
-- a claimer is completing or extending right now are left to it.
--
-- $1 is the table's rescue key: only the statement that gets the
-- transaction-level advisory lock on it does anything, so one rescue at a
-- time runs per table and the others return at once with no rows. (A
-- one-argument key lives apart from the two-int4 keys of advisory claims.)
-- The condition has no column in it, so it is a one-time filter checked
-- before any row is read.
UPDATE {{table "jobs"}} AS t
SET state = CASE WHEN t.attempt + 1 >= t.max_attempts THEN 'dead' ELSE 'ready' END,
    attempt = t.attempt + 1,
    last_error = 'dbq: lease expired: the holder died or stalled without Extend',
    claim_token = NULL,
    claimed_until = NULL
FROM (
    SELECT id
    FROM {{table "jobs"}}
    WHERE pg_try_advisory_xact_lock($1::int8)
      AND state = 'claimed' AND claimed_until < now()
    ORDER BY claimed_until
    LIMIT 1000
    FOR UPDATE SKIP LOCKED
) AS x
WHERE t.id = x.id AND t.state = 'claimed' AND t.claimed_until < now()
RETURNING t.id
