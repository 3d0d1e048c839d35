-- delete: the end of an export batch that moved its jobs: delete the jobs
-- named by the (id) rows of the VALUES list from jobs and free their
-- dedupe keys. Runs in the batch's transaction, which holds the rows'
-- update locks; FORCESEEK finds each row by its key, so the statement
-- locks only its own rows.
SET NOCOUNT ON;
DECLARE @gone TABLE (
    id         BIGINT        NOT NULL PRIMARY KEY,
    queue      VARCHAR(64)   COLLATE Latin1_General_BIN2 NOT NULL,
    dedupe_key NVARCHAR(200) COLLATE Latin1_General_100_BIN2 NULL
);
DELETE j
OUTPUT deleted.id, deleted.queue, deleted.dedupe_key INTO @gone (id, queue, dedupe_key)
FROM {{table "jobs"}} AS j WITH (ROWLOCK, FORCESEEK)
INNER JOIN (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}(@i{{$i}}){{end}}) AS l (id) ON j.id = l.id;
DELETE d
FROM {{table "jobs_dedupe"}} AS d WITH (ROWLOCK, FORCESEEK)
INNER JOIN @gone AS x ON d.queue = x.queue AND d.dedupe_key = x.dedupe_key AND d.id = x.id;
SELECT id FROM @gone;
