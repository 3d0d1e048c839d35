-- Deletes those of jobs $1 no one holds. A claimed row is a lease holder's;
-- a ready row whose advisory key a live session holds (claim_advisory.sql)
-- is an advisory claimer's, and pg_try_advisory_xact_lock fails on it. The
-- lock taken on a free key lasts until this statement commits, so no
-- advisory claimer can take the job while it is being deleted.
-- The ids join on the primary key (see complete_advisory.sql).
DELETE FROM {{table "jobs"}} AS t
USING unnest($1::int8[]) AS k(id)
WHERE t.id = k.id AND t.state <> 'claimed'
  AND pg_try_advisory_xact_lock(t.tableoid::int4, t.id::bit(32)::int4)
RETURNING t.id
