-- The stored job of queue ? with dedupe key ? (a probe of the unique index
-- jobs_dedupe).
SELECT id FROM {{table "jobs"}} FORCE INDEX ({{ident "jobs_dedupe"}}) WHERE queue = ? AND dedupe_key = ?
