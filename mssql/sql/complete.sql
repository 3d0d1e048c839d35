-- complete: delete the held jobs named by the (id, token) rows of the
-- VALUES list and free their dedupe keys, in one transaction; return the
-- ids deleted. A lease whose token no longer matches deletes nothing.
-- XACT_ABORT rolls the transaction back on any error or client cancel; the
-- SET options end with this parameterized batch (sp_executesql). FORCESEEK
-- finds each row by its key, so the statement locks only its own rows: a
-- scan would wait on, or deadlock with, other claimers' acknowledgements.
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @done TABLE (
    id         BIGINT        NOT NULL PRIMARY KEY,
    queue      VARCHAR(64)   COLLATE Latin1_General_BIN2 NOT NULL,
    dedupe_key NVARCHAR(200) COLLATE Latin1_General_100_BIN2 NULL
);
BEGIN TRANSACTION;
DELETE f
OUTPUT deleted.id, deleted.queue, deleted.dedupe_key INTO @done (id, queue, dedupe_key)
FROM {{table "jobs_inflight"}} AS f WITH (ROWLOCK, FORCESEEK)
INNER JOIN (VALUES {{range $i := rows .N}}{{if $i}}, {{end}}(@i{{$i}}, @t{{$i}}){{end}}) AS l (id, token) ON f.id = l.id AND f.claim_token = l.token;
DELETE d
FROM {{table "jobs_dedupe"}} AS d WITH (ROWLOCK, FORCESEEK)
INNER JOIN @done AS x ON d.queue = x.queue AND d.dedupe_key = x.dedupe_key AND d.id = x.id;
COMMIT TRANSACTION;
SELECT id FROM @done;
