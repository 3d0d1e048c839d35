-- existing: the (queue, dedupe_key) rows of the VALUES list that
-- jobs_dedupe already records, with their job ids. Each key is read under
-- an update lock on it, or on the gap where it would be, held to the end
-- of the import's transaction (UPDLOCK, HOLDLOCK), as in
-- enqueue_unique.sql: an enqueue of the same key waits until the import
-- ends, and a job found cannot complete and free its key before then.
-- FORCESEEK: one seek per key, so the range locks cover only those keys.
SELECT d.queue, d.dedupe_key, d.id
FROM {{table "jobs_dedupe"}} AS d WITH (UPDLOCK, HOLDLOCK, ROWLOCK, FORCESEEK)
INNER JOIN (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}(@q{{$i}}, @k{{$i}}){{end}}) AS l (queue, dedupe_key) ON d.queue = l.queue AND d.dedupe_key = l.dedupe_key;
