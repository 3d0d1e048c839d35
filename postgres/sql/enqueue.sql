-- Inserts a batch of jobs in one statement, all or none. Every column
-- arrives as one array parameter, so a batch of any size is one statement
-- with nine parameters. A NULL run_at means now() + delay_us on the
-- database clock. Rows are inserted in input order, so the identity values
-- ascend in input order.
--
-- $9 is the table's notification channel (NULL: notify off). One
-- pg_notify per distinct queue of the batch, sent on commit of the
-- statement's transaction, so listeners hear only of committed jobs. The
-- one-row count is joined in so that the notify always runs.
WITH ins AS (
    INSERT INTO {{table "jobs"}} (queue, payload, priority, run_at, max_attempts, dedupe_key, kind)
    SELECT u.queue,
           u.payload,
           u.priority,
           coalesce(u.run_at, now() + u.delay_us * interval '1 microsecond'),
           u.max_attempts,
           u.dedupe_key,
           u.kind
    FROM unnest($1::text[], $2::bytea[], $3::int2[], $4::timestamptz[], $5::int8[], $6::int4[], $7::text[], $8::text[])
         WITH ORDINALITY AS u(queue, payload, priority, run_at, delay_us, max_attempts, dedupe_key, kind, ord)
    ORDER BY u.ord
    RETURNING id, queue
), woke AS (
    SELECT count(pg_notify($9::text, x.queue)) AS n
    FROM (SELECT DISTINCT queue FROM ins) AS x
    WHERE $9::text IS NOT NULL
)
SELECT ins.id FROM ins CROSS JOIN woke
