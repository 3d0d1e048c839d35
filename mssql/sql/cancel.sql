-- cancel: delete the jobs named by the (id) rows of the VALUES list that
-- no one holds — those in jobs: ready, scheduled or dead — and free their
-- dedupe keys, in one transaction; return the ids deleted. A held job is in
-- jobs_inflight, which this does not touch: its holder may still complete,
-- retry or release it. A row a claim is taking at this instant is waited
-- for (briefly: claims are single statements) and then is held, so not
-- deleted. XACT_ABORT and FORCESEEK as in complete.sql.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @done TABLE (
    id         BIGINT        NOT NULL PRIMARY KEY,
    queue      VARCHAR(64)   COLLATE Latin1_General_BIN2 NOT NULL,
    dedupe_key NVARCHAR(200) COLLATE Latin1_General_100_BIN2 NULL
);
BEGIN TRANSACTION;
DELETE j
OUTPUT deleted.id, deleted.queue, deleted.dedupe_key INTO @done (id, queue, dedupe_key)
FROM {{table "jobs"}} AS j WITH (ROWLOCK, FORCESEEK)
INNER JOIN (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}(@i{{$i}}){{end}}) AS l (id) ON j.id = l.id;
DELETE d
FROM {{table "jobs_dedupe"}} AS d WITH (ROWLOCK, FORCESEEK)
INNER JOIN @done AS x ON d.queue = x.queue AND d.dedupe_key = x.dedupe_key AND d.id = x.id;
COMMIT TRANSACTION;
SELECT id FROM @done;
