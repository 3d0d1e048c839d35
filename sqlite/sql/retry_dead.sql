-- Makes up to 1,000 dead jobs of queue ?1 ready now with attempt 0: those
-- of ?2 (a JSON array of ids), or all when ?2 is NULL. The caller loops
-- until fewer come back, so no write transaction holds the lock long.
UPDATE {{table "jobs"}}
SET state = 'ready',
    attempt = 0,
    run_at = (CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000),
    claim_token = NULL,
    claimed_until = NULL
WHERE id IN (
    SELECT id FROM {{table "jobs"}}
    WHERE queue = ?1
      AND state = 'dead'
      AND (?2 IS NULL OR id IN (SELECT value FROM json_each(?2)))
    ORDER BY id
    LIMIT 1000)
RETURNING id
