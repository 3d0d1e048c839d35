-- The stored job of queue $1 with dedupe key $2 (jobs_dedupe).
SELECT id FROM {{table "jobs"}} WHERE queue = $1 AND dedupe_key = $2
