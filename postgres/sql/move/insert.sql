-- insert: stores the imported jobs as they were, one array parameter per
-- column, in input order; a (queue, dedupe_key) already stored is skipped.
-- stored.sql then reads every job of the batch by its key: the new ones
-- and those that were there.
INSERT INTO {{table "jobs"}}
    (queue, payload, priority, run_at, attempt, max_attempts, state, last_error, dedupe_key, created_at, kind)
SELECT u.queue, u.payload, u.priority, u.run_at, u.attempt, u.max_attempts, u.state, u.last_error, u.dedupe_key, u.created_at, u.kind
FROM unnest($1::text[], $2::bytea[], $3::int2[], $4::timestamptz[], $5::int4[], $6::int4[], $7::text[], $8::text[],
            $9::text[], $10::timestamptz[], $11::text[])
     WITH ORDINALITY AS u(queue, payload, priority, run_at, attempt, max_attempts, state, last_error, dedupe_key, created_at, kind, ord)
ORDER BY u.ord
ON CONFLICT (queue, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
RETURNING id
