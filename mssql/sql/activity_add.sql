-- activity_add: add .N counts to their rows (minute, queue, kind,
-- process), inserting those missing, in one batch and transaction. Per row
-- i: minute @m{i}, queue @q{i}, kind @k{i}, process @p{i}, and the counts
-- @c{i} (completed), @r{i} (retried), @d{i} (dead); the INSERT reads the
-- same parameters again. A process writes only rows of its own process id,
-- so no other writer waits here; the UPDATE's key locks, and the INSERT's
-- key-range locks where rows are missing (UPDLOCK, HOLDLOCK), make it a
-- safe upsert all the same. (No MERGE: it has upsert pitfalls of its own,
-- and the statement checker of the tests cannot parse it.)
-- XACT_ABORT rolls back on any error or client cancel.
SET NOCOUNT ON;
SET XACT_ABORT ON;
BEGIN TRANSACTION;
UPDATE a
SET completed = a.completed + s.completed, retried = a.retried + s.retried, dead = a.dead + s.dead
FROM {{table "activity"}} AS a WITH (UPDLOCK, HOLDLOCK)
INNER JOIN (VALUES {{range $i := rows .N}}{{if $i}},
       {{end}}(CONVERT(DATETIME2(0), SWITCHOFFSET(@m{{$i}}, '+00:00')), @q{{$i}}, @k{{$i}}, @p{{$i}}, @c{{$i}}, @r{{$i}}, @d{{$i}}){{end}})
    AS s (minute, queue, kind, process, completed, retried, dead)
    ON a.minute = s.minute AND a.queue = s.queue AND a.kind = s.kind AND a.process = s.process;
INSERT INTO {{table "activity"}} (minute, queue, kind, process, completed, retried, dead)
SELECT s.minute, s.queue, s.kind, s.process, s.completed, s.retried, s.dead
FROM (VALUES {{range $i := rows .N}}{{if $i}},
       {{end}}(CONVERT(DATETIME2(0), SWITCHOFFSET(@m{{$i}}, '+00:00')), @q{{$i}}, @k{{$i}}, @p{{$i}}, @c{{$i}}, @r{{$i}}, @d{{$i}}){{end}})
    AS s (minute, queue, kind, process, completed, retried, dead)
WHERE NOT EXISTS (
    SELECT 1 FROM {{table "activity"}} AS a WITH (UPDLOCK, HOLDLOCK)
    WHERE a.minute = s.minute AND a.queue = s.queue AND a.kind = s.kind AND a.process = s.process);
COMMIT TRANSACTION;
