-- Lists jobs with id > ? in id order, at most ?. The optional filters are
-- fixed text whose values are bind parameters, so each combination has a
-- plan of its own: a walk of the primary key from the page's start, which
-- stops at the LIMIT (its cost is the rows up to the page's last match),
-- or for a queue's dead jobs, which are usually few among many ready ones,
-- the claim index's (queue, 'dead') range, sorted. No index has kind: a
-- filter on it is a condition on the rows the walk reads.
SELECT id, queue, kind, payload, priority, run_at, attempt, max_attempts, state,
       claim_token, claimed_until, last_error, dedupe_key, created_at
FROM {{table "jobs"}} FORCE INDEX ({{if .DeadOfQueue}}{{ident "jobs_claim"}}{{else}}PRIMARY{{end}})
WHERE id > ?{{if .ByQueue}} AND queue = ?{{end}}{{if .ByState}} AND state = ?{{end}}{{if .ByKind}} AND kind = ?{{end}}
ORDER BY id
LIMIT ?
