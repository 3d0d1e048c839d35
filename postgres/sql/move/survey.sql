-- survey: the largest payload and key among the jobs of queues $1 (NULL:
-- every queue) that are ready now ($2), scheduled ($3) or dead ($4).
SELECT coalesce(max(octet_length(payload)), 0), coalesce(max(octet_length(dedupe_key)), 0),
       coalesce(max(char_length(dedupe_key)), 0)
FROM {{table "jobs"}}
WHERE ($1::text[] IS NULL OR queue = ANY($1::text[]))
  AND ((state = 'ready' AND run_at <= now() AND $2::bool)
    OR (state = 'ready' AND run_at > now() AND $3::bool)
    OR (state = 'dead' AND $4::bool))
