-- Advisory claim (SEEDS 000, walked the way Que does it). Walks the claim
-- index of queue $1 one row at a time in (priority, run_at, id) order and
-- tries a session advisory lock on each row, keyed (table oid, id folded to
-- int4); a row another session holds is skipped, never waited on. The walk
-- stops as soon as $3 rows are locked, so no row is locked that is not
-- returned; a paused queue (a row of the queues table) yields none. $2 lists the jobs this session already holds: advisory locks
-- are re-entrant, so they must not be taken again.
--
-- The walk starts at ($4, $5, $6) in claim order: the head of the queue,
-- or, when the claimer's last walk passed more rows other sessions held
-- than it locked, the first row that walk locked (advisory.go, resume).
-- The last column counts the rows the walk passed because another session
-- held them.
--
-- Each step finds the next due row after the last one in claim order: the
-- next in the same priority, else the first of the next priority that has
-- one. prio lists the queue's distinct ready priorities (one index descent
-- each), so the walk never reads the scheduled jobs of a priority: a
-- million future jobs ahead of the due ones cost nothing. A walk that
-- resumes at ($4, $5, $6) starts in priority $4 at (run_at, id) >= ($5, $6).
--
-- Each lock is taken in a LATERAL subquery of its own (fenced by OFFSET 0)
-- so that it runs exactly once per row visited. The rows come from this
-- statement's snapshot: a job another claimer completed and unlocked since
-- may be locked here, which is why the post-check (postcheck.sql) must
-- follow.
WITH RECURSIVE prio(p) AS (
    SELECT (SELECT priority FROM {{jobs}}
            WHERE queue = $1 AND state = 'ready'
            ORDER BY priority LIMIT 1)
  UNION ALL
    SELECT (SELECT priority FROM {{jobs}}
            WHERE queue = $1 AND state = 'ready' AND priority > prio.p
            ORDER BY priority LIMIT 1)
    FROM prio
    WHERE prio.p IS NOT NULL
), walk AS (
    SELECT j.id, j.priority, j.run_at, j.ns, l.locked,
           $3::int4 - l.locked::int4 AS remaining
    FROM (
        (SELECT id, priority, run_at, tableoid::int4 AS ns
         FROM {{jobs}}
         WHERE queue = $1 AND state = 'ready' AND priority = $4::int2 AND run_at <= now()
           AND (run_at, id) >= ($5::timestamptz, $6::int8)
           AND NOT id = ANY($2::int8[])
         ORDER BY run_at, id
         LIMIT 1)
        UNION ALL
        (SELECT n.id, n.priority, n.run_at, n.ns
         FROM prio
         CROSS JOIN LATERAL (
             SELECT id, priority, run_at, tableoid::int4 AS ns
             FROM {{jobs}}
             WHERE queue = $1 AND state = 'ready' AND priority = prio.p AND run_at <= now()
               AND NOT id = ANY($2::int8[])
             ORDER BY run_at, id
             LIMIT 1
         ) AS n
         WHERE prio.p > $4::int2
         LIMIT 1)
        LIMIT 1
    ) AS j
    CROSS JOIN LATERAL (
        SELECT pg_try_advisory_lock(j.ns, j.id::bit(32)::int4) AS locked OFFSET 0
    ) AS l
    WHERE NOT EXISTS (SELECT 1 FROM {{queues}} WHERE queue = $1 AND paused)
  UNION ALL
    SELECT j.id, j.priority, j.run_at, j.ns, l.locked,
           w.remaining - l.locked::int4
    FROM walk AS w
    CROSS JOIN LATERAL (
        (SELECT id, priority, run_at, tableoid::int4 AS ns
         FROM {{jobs}}
         WHERE queue = $1 AND state = 'ready' AND priority = w.priority AND run_at <= now()
           AND (run_at, id) > (w.run_at, w.id)
           AND NOT id = ANY($2::int8[])
         ORDER BY run_at, id
         LIMIT 1)
        UNION ALL
        (SELECT n.id, n.priority, n.run_at, n.ns
         FROM prio
         CROSS JOIN LATERAL (
             SELECT id, priority, run_at, tableoid::int4 AS ns
             FROM {{jobs}}
             WHERE queue = $1 AND state = 'ready' AND priority = prio.p AND run_at <= now()
               AND NOT id = ANY($2::int8[])
             ORDER BY run_at, id
             LIMIT 1
         ) AS n
         WHERE prio.p > w.priority
         LIMIT 1)
        LIMIT 1
    ) AS j
    CROSS JOIN LATERAL (
        SELECT pg_try_advisory_lock(j.ns, j.id::bit(32)::int4) AS locked OFFSET 0
    ) AS l
    WHERE w.remaining > 0
)
SELECT id, ns, priority, run_at,
       (SELECT count(*) FROM walk WHERE NOT locked)::int4 AS skipped
FROM walk
WHERE locked
