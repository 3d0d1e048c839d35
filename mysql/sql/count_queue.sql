-- Counts queue ? as stats.sql does, but each count stops at ?, so it reads
-- about that many entries of the claim index per state however many jobs
-- are stored (stats.sql reads every row). Within a priority the claim
-- index is in run_at order, so a priority's due jobs are one range of it
-- and its future jobs the next: given the queue's .N ready priorities
-- (queue_names.sql), ready and scheduled are each one range scan over
-- those .N ranges, the due or the future one of each priority, that stops
-- at its LIMIT, whatever the mix of due and future jobs. (MariaDB seeks
-- only on constants: a priority taken from a subquery or a recursive CTE
-- would read the queue's whole range.) With no ready priorities both are
-- 0. The oldest ready wait is exact: the first run_at of each priority (a
-- loose scan, one dive per priority), the oldest of those if it has
-- passed. paused is one primary-key probe of the queues table. The
-- parameters, in order: when .N > 0, the queue, the .N priorities and the
-- limit for ready, then again for scheduled; the queue and the limit for
-- held and for dead; the queue for the oldest wait and for paused.
SELECT {{if .N}}(SELECT COUNT(*) FROM (
            SELECT 1 FROM {{table "jobs"}} FORCE INDEX ({{ident "jobs_claim"}})
            WHERE queue = ? AND state = 'ready' AND priority IN ({{params .N}}) AND run_at <= UTC_TIMESTAMP(6)
            LIMIT ?) AS c),
       (SELECT COUNT(*) FROM (
            SELECT 1 FROM {{table "jobs"}} FORCE INDEX ({{ident "jobs_claim"}})
            WHERE queue = ? AND state = 'ready' AND priority IN ({{params .N}}) AND run_at > UTC_TIMESTAMP(6)
            LIMIT ?) AS c),{{else}}0, 0,{{end}}
       (SELECT COUNT(*) FROM (
            SELECT 1 FROM {{table "jobs"}} FORCE INDEX ({{ident "jobs_claim"}})
            WHERE queue = ? AND state = 'claimed' LIMIT ?) AS c),
       (SELECT COUNT(*) FROM (
            SELECT 1 FROM {{table "jobs"}} FORCE INDEX ({{ident "jobs_claim"}})
            WHERE queue = ? AND state = 'dead' LIMIT ?) AS c),
       COALESCE((SELECT TIMESTAMPDIFF(MICROSECOND, MIN(o.first), UTC_TIMESTAMP(6)) FROM (
                SELECT MIN(run_at) AS first FROM {{table "jobs"}} FORCE INDEX ({{ident "jobs_claim"}})
                WHERE queue = ? AND state = 'ready' GROUP BY queue, state, priority) AS o
            WHERE o.first <= UTC_TIMESTAMP(6)), 0),
       EXISTS (SELECT 1 FROM {{table "queues"}} AS p WHERE p.queue = ? AND p.paused)
