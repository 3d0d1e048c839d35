-- Releases session advisory locks, given as parallel arrays of (namespace,
-- key). Used after a completion, retry or release has committed, for
-- post-check drops, and to sweep up locks a cut-off claim left behind.
SELECT u.ns, u.k, pg_advisory_unlock(u.ns, u.k) AS unlocked
FROM unnest($1::int4[], $2::int4[]) AS u(ns, k)
