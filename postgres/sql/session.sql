-- Makes the session the advisory claimer's own, once, when the claimer
-- takes its connection: sets the session's mark (dbq.claimer) to $1, which
-- every statement of the claimer then checks (the session guard), unless
-- the session already holds advisory locks of the jobs table ($2, its
-- quoted, qualified name) or carries another claimer's mark. Either means
-- another client shares the session: a transaction pooler hands one
-- client's statements to a server connection other clients use too, and
-- advisory locks are re-entrant, so two claimers in one session would both
-- take the same job. In one statement, so nothing can come between the
-- check and the mark. Returns the server process, whether the mark was
-- set, and the isolation level the session's transactions start with (the
-- claim's post-check shares the walk's transaction only under READ
-- COMMITTED; claim_advisory.go, walkChecked).
SELECT pg_backend_pid(),
       CASE WHEN coalesce(current_setting('dbq.claimer', true), '') = ''
                 AND NOT EXISTS (SELECT 1 FROM pg_locks
                                 WHERE locktype = 'advisory' AND objsubid = 2 AND granted
                                   AND pid = pg_backend_pid() AND classid = to_regclass($2)::oid)
            THEN set_config('dbq.claimer', $1, false) IS NOT NULL
            ELSE false
       END,
       current_setting('transaction_isolation')
