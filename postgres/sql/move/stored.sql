-- stored: the jobs stored under the keys ($1 queues, $2 dedupe keys, in
-- pairs).
SELECT j.id, j.queue, j.payload, j.priority, j.run_at, j.attempt, j.max_attempts, j.state,
       j.last_error, j.dedupe_key, j.created_at, j.kind
FROM {{table "jobs"}} j JOIN unnest($1::text[], $2::text[]) AS k(queue, dedupe_key)
  ON j.queue = k.queue AND j.dedupe_key = k.dedupe_key
