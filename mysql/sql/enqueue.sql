-- One multi-row INSERT per batch, a "simple insert" in InnoDB's terms (row
-- count known up front, no explicit ids, no ON DUPLICATE KEY): its ids come
-- from LAST_INSERT_ID() (see doc.go). claim_token is NULL, or in
-- innodb_autoinc_lock_mode 2 a random per-batch marker that
-- enqueue_ids.sql finds the rows by; it means nothing on a ready row.
-- run_at: the given UTC time, or the database clock plus the delay.
INSERT INTO {{table "jobs"}}
    (queue, kind, payload, priority, run_at, max_attempts, dedupe_key, claim_token, created_at)
VALUES
{{- range $i := rows .N}}{{if $i}},{{end}}
    (?, ?, ?, ?, COALESCE(CAST(? AS DATETIME(6)), DATE_ADD(UTC_TIMESTAMP(6), INTERVAL ? MICROSECOND)), ?, ?, ?, UTC_TIMESTAMP(6))
{{- end}}
