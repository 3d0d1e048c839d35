-- Finds the job of queue ?1 whose dedupe key is ?2 (unique index probe).
SELECT id FROM {{table "jobs"}} WHERE queue = ?1 AND dedupe_key = ?2
