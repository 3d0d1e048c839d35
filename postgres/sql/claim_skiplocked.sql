-- SKIP LOCKED claim (lease + token, as River and Oban do): takes up to $2
-- ready jobs of queue $1 in (priority, run_at, id) order from the claim
-- index, skipping rows another transaction has locked, and marks them
-- claimed with token $3 until now() + $4 µs. One autocommit statement, so
-- it holds no session state and works behind PgBouncer in transaction mode.
--
-- The candidates are read one priority at a time, each as its own range of
-- the claim index, (queue, priority, run_at <= now()): a single range in
-- (priority, run_at, id) order would pass every future job of a lower
-- priority number before reaching a due job of a higher one, and a million
-- scheduled jobs ahead cost a million index entries per claim. The nested
-- loops run lazily and the LIMIT stops them, so a priority's rows are
-- locked only when the ones before it did not fill the batch.
--
-- The claim starts at ($5, $6, $7) in claim order (claim_skiplocked.go, from):
-- the head, or where the claimer's last claim began. Until vacuum, the
-- claim index keeps an entry for every job claimed since, and a scan from
-- the head reads them all: after 250,000 claims without vacuum a claim
-- read 2,600 index pages. So the three branches, in order, are
--   lo:  priorities before $5, from their first due job (new urgent jobs
--        are never passed over);
--   at:  priority $5 from (run_at, id) >= ($6, $7);
--   hi:  priorities after $5, from their first due job.
-- Each prio CTE walks the distinct ready priorities of its side (one index
-- descent each).
--
-- The UPDATE changes only rows still ready and due: the statement, not the
-- SKIP LOCKED before it, makes a row this claim's. On PostgreSQL the lock
-- holds and the check changes nothing; where SKIP LOCKED locks nothing, a
-- second claim of the same rows waits on the first one's update and then
-- finds them claimed (issue #23). The state test is a CASE so that the
-- partial claim index cannot serve it (see postcheck.sql): t is reached by
-- primary key only.
WITH RECURSIVE lo(p) AS (
    SELECT (SELECT priority FROM {{table "jobs"}}
            WHERE queue = $1 AND state = 'ready' AND priority < $5::int2
            ORDER BY priority LIMIT 1)
  UNION ALL
    SELECT (SELECT priority FROM {{table "jobs"}}
            WHERE queue = $1 AND state = 'ready' AND priority > lo.p AND priority < $5::int2
            ORDER BY priority LIMIT 1)
    FROM lo
    WHERE lo.p IS NOT NULL
), hi(p) AS (
    SELECT (SELECT priority FROM {{table "jobs"}}
            WHERE queue = $1 AND state = 'ready' AND priority > $5::int2
            ORDER BY priority LIMIT 1)
  UNION ALL
    SELECT (SELECT priority FROM {{table "jobs"}}
            WHERE queue = $1 AND state = 'ready' AND priority > hi.p
            ORDER BY priority LIMIT 1)
    FROM hi
    WHERE hi.p IS NOT NULL
),
-- The candidates, read once: a MATERIALIZED CTE is never run again, so
-- however the UPDATE joins it to the table, a rescan cannot lock and
-- return rows past the LIMIT. (Run as a subquery on the inner side of a
-- nested loop, each rescan skipped the rows this statement had just
-- updated and returned the next ones: a claim of 32 updated 59.)
c AS MATERIALIZED (
    SELECT cand.id
    FROM (
        (SELECT j.id
         FROM lo
         CROSS JOIN LATERAL (
             SELECT id
             FROM {{table "jobs"}}
             WHERE queue = $1 AND state = 'ready' AND priority = lo.p AND run_at <= now()
             ORDER BY run_at, id
             LIMIT $2
             FOR UPDATE SKIP LOCKED
         ) AS j
         WHERE lo.p IS NOT NULL)
        UNION ALL
        (SELECT a.id
         FROM (
             SELECT id
             FROM {{table "jobs"}}
             WHERE queue = $1 AND state = 'ready' AND priority = $5::int2 AND run_at <= now()
               AND (run_at, id) >= ($6::timestamptz, $7::int8)
             ORDER BY run_at, id
             LIMIT $2
             FOR UPDATE SKIP LOCKED
         ) AS a)
        UNION ALL
        (SELECT j.id
         FROM hi
         CROSS JOIN LATERAL (
             SELECT id
             FROM {{table "jobs"}}
             WHERE queue = $1 AND state = 'ready' AND priority = hi.p AND run_at <= now()
             ORDER BY run_at, id
             LIMIT $2
             FOR UPDATE SKIP LOCKED
         ) AS j
         WHERE hi.p IS NOT NULL)
    ) AS cand
    WHERE NOT EXISTS (SELECT 1 FROM {{table "queues"}} WHERE queue = $1 AND paused)
    LIMIT $2
)
UPDATE {{table "jobs"}} AS t
SET state = 'claimed',
    claim_token = $3,
    claimed_until = now() + $4::int8 * interval '1 microsecond'
FROM c
WHERE t.id = c.id AND CASE t.state WHEN 'ready' THEN true END AND t.run_at <= now()
RETURNING t.id, t.queue, t.payload, t.priority, t.run_at, t.attempt, t.max_attempts,
          t.claimed_until, t.last_error, t.dedupe_key, t.created_at, t.kind
