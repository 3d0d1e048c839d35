-- Counts queue ? as stats.sql does, but each count stops at ?, so it reads
-- about that many entries of the claim index per state however many jobs
-- are stored (stats.sql reads every row). Ready reads the (queue, 'ready')
-- range forwards, where each priority's due rows come first, scheduled
-- reads it backwards, where its future rows come first. The oldest ready
-- wait is exact: the first run_at of each priority (skipping from one
-- priority to the next, one index dive each), the oldest of those if it
-- has passed. paused is one primary-key probe of the queues table. The
-- parameters, in order: the queue and the limit for each of the four
-- counts, the queue three times for the oldest wait and once for paused.
SELECT (SELECT COUNT(*) FROM (
            SELECT 1 FROM {{table "jobs"}} FORCE INDEX ({{ident "jobs_claim"}})
            WHERE queue = ? AND state = 'ready' AND run_at <= UTC_TIMESTAMP(6)
            ORDER BY priority, run_at LIMIT ?) AS c),
       (SELECT COUNT(*) FROM (
            SELECT 1 FROM {{table "jobs"}} FORCE INDEX ({{ident "jobs_claim"}})
            WHERE queue = ? AND state = 'ready' AND run_at > UTC_TIMESTAMP(6)
            ORDER BY priority DESC, run_at DESC LIMIT ?) AS c),
       (SELECT COUNT(*) FROM (
            SELECT 1 FROM {{table "jobs"}} FORCE INDEX ({{ident "jobs_claim"}})
            WHERE queue = ? AND state = 'claimed' LIMIT ?) AS c),
       (SELECT COUNT(*) FROM (
            SELECT 1 FROM {{table "jobs"}} FORCE INDEX ({{ident "jobs_claim"}})
            WHERE queue = ? AND state = 'dead' LIMIT ?) AS c),
       COALESCE((WITH RECURSIVE prio(priority) AS (
                SELECT MIN(priority) FROM {{table "jobs"}} FORCE INDEX ({{ident "jobs_claim"}})
                WHERE queue = ? AND state = 'ready'
                UNION ALL
                SELECT (SELECT MIN(j.priority) FROM {{table "jobs"}} AS j FORCE INDEX ({{ident "jobs_claim"}})
                        WHERE j.queue = ? AND j.state = 'ready' AND j.priority > p.priority)
                FROM prio AS p WHERE p.priority IS NOT NULL
            )
            SELECT TIMESTAMPDIFF(MICROSECOND, MIN(o.first), UTC_TIMESTAMP(6)) FROM (
                SELECT (SELECT MIN(j.run_at) FROM {{table "jobs"}} AS j FORCE INDEX ({{ident "jobs_claim"}})
                        WHERE j.queue = ? AND j.state = 'ready' AND j.priority = p.priority) AS first
                FROM prio AS p WHERE p.priority IS NOT NULL) AS o
            WHERE o.first <= UTC_TIMESTAMP(6)), 0),
       EXISTS (SELECT 1 FROM {{table "queues"}} AS p WHERE p.queue = ? AND p.paused)
