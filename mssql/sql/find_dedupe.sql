-- find_dedupe: the id of queue @queue's stored job with dedupe key
-- @dedupe_key, from jobs_dedupe (its primary key is the two).
SELECT d.id FROM {{table "jobs_dedupe"}} AS d WHERE d.queue = @queue AND d.dedupe_key = @dedupe_key;
