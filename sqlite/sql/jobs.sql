-- Lists jobs after id ?3 in id order, at most ?4. ?1, ?2 and ?5 filter on
-- queue, state and kind when not empty. It walks the primary key from ?3,
-- so a page costs the rows up to its last match, never the whole table.
SELECT id, queue, kind, payload, priority, run_at, attempt, max_attempts, state,
       claim_token, claimed_until, last_error, dedupe_key, created_at
FROM {{table "jobs"}}
WHERE id > ?3
  AND (?1 = '' OR queue = ?1)
  AND (?2 = '' OR state = ?2)
  AND (?5 = '' OR kind = ?5)
ORDER BY id
LIMIT ?4
