-- Inserts one job unless its queue has a stored job with its dedupe key.
-- ON CONFLICT DO NOTHING never raises, so the caller's transaction goes on;
-- no row returned means the job was there (dedupe_existing.sql finds it).
-- $9 is the notification channel, as in enqueue.sql: notified only when a
-- job was inserted.
WITH ins AS (
    INSERT INTO {{table "jobs"}} (queue, payload, priority, run_at, max_attempts, dedupe_key, kind)
    VALUES ($1::text, $2::bytea, $3::int2,
            coalesce($4::timestamptz, now() + $5::int8 * interval '1 microsecond'),
            $6::int4, $7::text, $8::text)
    ON CONFLICT (queue, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
    RETURNING id, queue
), woke AS (
    SELECT count(pg_notify($9::text, queue)) AS n FROM ins WHERE $9::text IS NOT NULL
)
SELECT ins.id FROM ins CROSS JOIN woke
