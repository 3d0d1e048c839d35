-- Advisory claim (the walk Que does, run as one index scan).
-- Reads the claim index of queue $1 in (priority, run_at, id) order and
-- tries a session advisory lock on each row, keyed (table oid, id folded
-- to int4); a row another session holds is skipped, never waited on. $2
-- lists the jobs this session already holds: advisory locks are
-- re-entrant, so they must not be taken again. They are tested with NOT IN
-- over a subquery, which PostgreSQL plans as a hashed SubPlan built once
-- per statement: NOT id = ANY($2) would compare every row the walk reads
-- with every held id. pgbench, a walk past 1,000 held jobs that locks
-- 1,000: 5.0-6.2 ms with ANY, 2.3-2.7 ms hashed; past 100 locking 100:
-- 0.66-0.74 ms and 0.57-0.68 ms. The ids are never NULL, so NOT IN means
-- what it says. A paused queue (a row of
-- the queues table) yields none, before any lock is tried.
--
-- Exactly the rows returned are locked. The candidates come lazily from
-- index scans, each is locked in a LATERAL subquery of its own (fenced by
-- OFFSET 0, so it runs once per row), and the LIMIT stops pulling rows as
-- soon as $3 are locked: nothing between the scan and the LIMIT reads
-- ahead (no sort, no window; walked is materialized whole before it is
-- read, so reading it twice locks nothing more). The rows come from this
-- statement's snapshot: a job another claimer completed and unlocked since
-- may be locked here, which is why the post-check (postcheck.sql) must
-- follow.
--
-- The walk starts at ($4, $5, $6) in claim order: the head of the queue,
-- or, after a walk that locked all it asked for, the first row that walk
-- locked (claim_advisory.go, planWalk).
-- The branches, in order: the priorities before $4 from their start (a
-- new urgent job is never passed over), priority $4 from ($5, $6), and
-- the priorities after $4 from their start. Each priority is one range of
-- the claim index (queue, priority, run_at <= now()), and lo and prio list
-- the queue's distinct ready priorities on either side of $4 (one index
-- descent each), so no scheduled job of a priority is read and a million
-- future jobs ahead of the due ones cost nothing.
--
-- The last column counts the rows passed so far because another session
-- held them (AdvisoryClaimer.HeldSkipped): each failed lock adds one to a
-- transaction-local setting, which the statement's own implicit
-- transaction ends; a walk's count is the last row's.
-- The ids locked are also recorded, comma-separated, in dbq.walked, a
-- setting local to the transaction, for a post-check that runs in it
-- (postcheck.sql with $1 NULL). walked is read once by that aggregate and
-- once for the rows returned; the LIMIT inside it still stops the walk.
-- The session guard (session.sql): $7 is the claimer's mark on its
-- session; run in any other session (a transaction pooler handed the
-- statement to another server connection) the statement fails before it
-- takes, checks or releases a lock.
WITH RECURSIVE lo(p) AS (
    SELECT (SELECT priority FROM {{table "jobs"}}
            WHERE queue = $1 AND state = 'ready' AND priority < $4::int2
            ORDER BY priority LIMIT 1)
  UNION ALL
    SELECT (SELECT priority FROM {{table "jobs"}}
            WHERE queue = $1 AND state = 'ready' AND priority > lo.p AND priority < $4::int2
            ORDER BY priority LIMIT 1)
    FROM lo
    WHERE lo.p IS NOT NULL
), prio(p) AS (
    SELECT (SELECT priority FROM {{table "jobs"}}
            WHERE queue = $1 AND state = 'ready' AND priority > $4::int2
            ORDER BY priority LIMIT 1)
  UNION ALL
    SELECT (SELECT priority FROM {{table "jobs"}}
            WHERE queue = $1 AND state = 'ready' AND priority > prio.p
            ORDER BY priority LIMIT 1)
    FROM prio
    WHERE prio.p IS NOT NULL
), walked AS MATERIALIZED (
SELECT c.id, c.ns, c.priority, c.run_at,
       coalesce(nullif(current_setting('dbq.claim_skipped', true), ''), '0')::int4 AS skipped
FROM (
    (SELECT n.id, n.priority, n.run_at, n.ns
     FROM lo
     CROSS JOIN LATERAL (
         SELECT id, priority, run_at, tableoid::int4 AS ns
         FROM {{table "jobs"}}
         WHERE queue = $1 AND state = 'ready' AND priority = lo.p AND run_at <= now()
           AND id NOT IN (SELECT unnest($2::int8[]))
         ORDER BY run_at, id
     ) AS n
     WHERE lo.p IS NOT NULL)
    UNION ALL
    (SELECT id, priority, run_at, tableoid::int4 AS ns
     FROM {{table "jobs"}}
     WHERE queue = $1 AND state = 'ready' AND priority = $4::int2 AND run_at <= now()
       AND (run_at, id) >= ($5::timestamptz, $6::int8)
       AND id NOT IN (SELECT unnest($2::int8[]))
     ORDER BY run_at, id)
    UNION ALL
    (SELECT n.id, n.priority, n.run_at, n.ns
     FROM prio
     CROSS JOIN LATERAL (
         SELECT id, priority, run_at, tableoid::int4 AS ns
         FROM {{table "jobs"}}
         WHERE queue = $1 AND state = 'ready' AND priority = prio.p AND run_at <= now()
           AND id NOT IN (SELECT unnest($2::int8[]))
         ORDER BY run_at, id
     ) AS n
     WHERE prio.p IS NOT NULL)
) AS c
CROSS JOIN LATERAL (
    SELECT CASE WHEN pg_try_advisory_lock(c.ns, c.id::bit(32)::int4) THEN true
                -- set_config returns the new count, never NULL: false.
                ELSE set_config('dbq.claim_skipped',
                                (coalesce(nullif(current_setting('dbq.claim_skipped', true), ''), '0')::int4 + 1)::text,
                                true) IS NULL
           END AS locked
    OFFSET 0
) AS l
WHERE l.locked
  AND NOT EXISTS (SELECT 1 FROM {{table "queues"}} WHERE queue = $1 AND paused)
  AND CASE WHEN current_setting('dbq.claimer', true) = $7::text THEN true
         ELSE ('dbq: postgres: server process ' || pg_backend_pid()
               || ' is not the advisory claimer''s session: a transaction pooler is in the way')::bool END
LIMIT $3
)
SELECT w.id, w.ns, w.priority, w.run_at, w.skipped
FROM (SELECT set_config('dbq.walked', coalesce(string_agg(id::text, ','), ''), true) AS ids
      FROM walked) AS s
JOIN walked AS w ON s.ids IS NOT NULL
