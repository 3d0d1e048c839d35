-- Inserts a batch of jobs in one statement, all or none. Every column
-- arrives as one array parameter, so a batch of any size is one statement
-- with seven parameters. A NULL run_at means now() + delay_us on the
-- database clock. Rows are inserted in input order, so the identity values
-- ascend in input order.
INSERT INTO {{jobs}} (queue, payload, priority, run_at, max_attempts, dedupe_key)
SELECT u.queue,
       u.payload,
       u.priority,
       coalesce(u.run_at, now() + u.delay_us * interval '1 microsecond'),
       u.max_attempts,
       u.dedupe_key
FROM unnest($1::text[], $2::bytea[], $3::int2[], $4::timestamptz[], $5::int8[], $6::int4[], $7::text[])
     WITH ORDINALITY AS u(queue, payload, priority, run_at, delay_us, max_attempts, dedupe_key, ord)
ORDER BY u.ord
RETURNING id
