-- Completes advisory-held jobs: deletes them. Run alone, so that it has
-- committed before unlock.sql releases their locks: unlocking first would
-- let another claimer lock a job whose delete its post-check cannot see yet.
DELETE FROM {{jobs}}
WHERE id = ANY($1::int8[]) AND state = 'ready'
RETURNING id
