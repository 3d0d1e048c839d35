-- Counts queue $1 as stats.sql does, but each count stops at $2, so it
-- reads about $2 index entries per state however many jobs are stored
-- (stats.sql reads every row). One statement per queue (see
-- queue_names.sql) keeps each plan small: cheap to plan, prepared once,
-- and far below the cost at which PostgreSQL would compile it (JIT).
--
-- held lists the queue's ready rows an advisory claimer holds (see
-- stats.sql), found from this table's locks in pg_locks: the lock key is
-- the id folded to 32 bits, so each key is tried with every high word the
-- ids reach, a primary-key probe each (OFFSET 0 keeps the planner from
-- hashing the queue's rows instead). Those rows count as held, not ready,
-- with $3, the queue's claimed rows (counted by queue_names.sql in its one
-- pass over the jobs in flight: no index here leads with queue for them).
--
-- prio skips through the queue's priorities in the claim index, one
-- descent each. Within a priority the index is in run_at order, so its
-- due rows are one range and its future rows the next: ready and
-- scheduled read, priority after priority, just that range (each
-- priority's read capped at $2), and the outer LIMIT $2 stops the whole
-- count once $2 rows are found. A count reads at most about $2 entries
-- plus a descent per priority, whatever the mix of due and future jobs.
-- The oldest ready wait is exact: per priority, the first due row no one
-- holds.
WITH RECURSIVE held AS MATERIALIZED (
    SELECT j.id
    FROM (SELECT DISTINCT l.objid
          FROM pg_locks AS l
          WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
            AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND l.classid = (SELECT tableoid FROM {{table "jobs"}} LIMIT 1)) AS h
    CROSS JOIN generate_series(0, coalesce((SELECT max(id) FROM {{table "jobs"}}), 0) >> 32) AS k(hi)
    CROSS JOIN LATERAL (
        SELECT j.id FROM {{table "jobs"}} AS j
        WHERE j.id = (k.hi << 32) + h.objid::bigint AND j.queue = $1 AND j.state = 'ready'
        OFFSET 0) AS j
), prio(priority) AS (
    (SELECT priority FROM {{table "jobs"}}
     WHERE queue = $1 AND state = 'ready' ORDER BY priority LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM {{table "jobs"}} AS j
            WHERE j.queue = $1 AND j.state = 'ready' AND j.priority > p.priority
            ORDER BY j.priority LIMIT 1)
    FROM prio AS p WHERE p.priority IS NOT NULL
), oldest AS (
    SELECT min((SELECT j.run_at FROM {{table "jobs"}} AS j
                WHERE j.queue = $1 AND j.state = 'ready' AND j.priority = p.priority
                  AND j.id NOT IN (SELECT id FROM held)
                ORDER BY j.run_at LIMIT 1)) AS run_at
    FROM prio AS p WHERE p.priority IS NOT NULL
)
SELECT (SELECT count(*) FROM (
            SELECT 1 FROM prio AS p
            CROSS JOIN LATERAL (
                SELECT 1 FROM {{table "jobs"}} AS j
                WHERE j.queue = $1 AND j.state = 'ready' AND j.priority = p.priority AND j.run_at <= now()
                  AND j.id NOT IN (SELECT id FROM held)
                ORDER BY j.run_at LIMIT $2) AS j
            WHERE p.priority IS NOT NULL
            LIMIT $2) AS c),
       (SELECT count(*) FROM (
            SELECT 1 FROM prio AS p
            CROSS JOIN LATERAL (
                SELECT 1 FROM {{table "jobs"}} AS j
                WHERE j.queue = $1 AND j.state = 'ready' AND j.priority = p.priority AND j.run_at > now()
                  AND j.id NOT IN (SELECT id FROM held)
                ORDER BY j.run_at LIMIT $2) AS j
            WHERE p.priority IS NOT NULL
            LIMIT $2) AS c),
       least($2, $3 + (SELECT count(*) FROM held)),
       (SELECT count(*) FROM (
            SELECT 1 FROM {{table "jobs"}} AS j
            WHERE j.queue = $1 AND j.state = 'dead' LIMIT $2) AS c),
       (SELECT CASE WHEN o.run_at <= now() THEN extract(epoch FROM now() - o.run_at) ELSE 0 END::float8 FROM oldest AS o),
       EXISTS (SELECT 1 FROM {{table "queues"}} AS q WHERE q.queue = $1 AND q.paused)
