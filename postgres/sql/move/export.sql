-- export: up to $6 jobs with id > $1, of queues $2 (NULL: every queue),
-- ready now ($3), scheduled ($4) or dead ($5). Candidates in id order
-- without locks, then each locked on its own, by primary key in a LATERAL
-- subquery (so that no plan can take locks on rows outside the batch): the
-- row by FOR UPDATE SKIP LOCKED (lease claimers skip it, and a row a claim
-- or a retry changed meanwhile fails the recheck of the filter), the job's
-- advisory key by pg_try_advisory_xact_lock (advisory claimers skip it, and
-- a job an advisory claimer holds is passed over). Both locks last until
-- the batch's transaction ends. The last column is the largest candidate
-- id, the next batch's cursor; an empty batch is one row of NULL jobs.
WITH c AS MATERIALIZED (
    SELECT id FROM {{table "jobs"}}
    WHERE id > $1
      AND ($2::text[] IS NULL OR queue = ANY($2::text[]))
      AND ((state = 'ready' AND run_at <= now() AND $3::bool)
        OR (state = 'ready' AND run_at > now() AND $4::bool)
        OR (state = 'dead' AND $5::bool))
    ORDER BY id
    LIMIT $6
), locked AS (
    SELECT l.*
    FROM c CROSS JOIN LATERAL (
        SELECT j.id, j.queue, j.payload, j.priority, j.run_at, j.attempt, j.max_attempts, j.state,
               j.last_error, j.dedupe_key, j.created_at, j.kind
        FROM {{table "jobs"}} j
        WHERE j.id = c.id
          AND ((j.state = 'ready' AND j.run_at <= now() AND $3::bool)
            OR (j.state = 'ready' AND j.run_at > now() AND $4::bool)
            OR (j.state = 'dead' AND $5::bool))
          AND pg_try_advisory_xact_lock(j.tableoid::int4, j.id::bit(32)::int4)
        FOR UPDATE OF j SKIP LOCKED
    ) AS l
)
SELECT l.*, (SELECT max(id) FROM c) FROM (SELECT 1) AS one LEFT JOIN locked l ON true ORDER BY l.id
