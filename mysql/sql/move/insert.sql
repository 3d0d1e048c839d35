-- insert: store .N jobs as they are — kind, state, attempt, max_attempts,
-- last_error, run_at, priority, payload, dedupe key and created_at kept —
-- under new ids. A key stored meanwhile (it cannot be: the source batch is
-- locked) keeps its row.
INSERT INTO {{table "jobs"}}
    (queue, kind, payload, priority, run_at, attempt, max_attempts, state, last_error, dedupe_key, created_at)
VALUES
{{- range $i := rows .N}}{{if $i}},{{end}}
    (?, ?, ?, ?, CAST(? AS DATETIME(6)), ?, ?, ?, ?, ?, CAST(? AS DATETIME(6)))
{{- end}}
ON DUPLICATE KEY UPDATE id = id
