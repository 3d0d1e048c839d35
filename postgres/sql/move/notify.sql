-- notify: wakes the workers of each queue of $2 once, on channel $1, when
-- the import's transaction commits.
SELECT pg_notify($1::text, q) FROM (SELECT DISTINCT unnest($2::text[]) AS q) AS x
