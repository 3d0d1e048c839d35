-- survey: the largest payload in bytes and the longest dedupe key, in
-- bytes and in characters, among the jobs the filter selects. ?1 is a
-- JSON array of queue names, '[]' for every queue; ?2, ?3 and ?4 select
-- ready, scheduled and dead jobs. Held jobs are not exported, so they are
-- not measured.
SELECT coalesce(max(length(CAST(payload AS BLOB))), 0), coalesce(max(length(CAST(dedupe_key AS BLOB))), 0),
       coalesce(max(length(dedupe_key)), 0)
FROM {{table "jobs"}} WHERE (?1 = '[]' OR queue IN (SELECT value FROM json_each(?1)))
  AND ((state = 'ready' AND run_at <= (CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000) AND ?2)
    OR (state = 'ready' AND run_at > (CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000) AND ?3)
    OR (state = 'dead' AND ?4))
