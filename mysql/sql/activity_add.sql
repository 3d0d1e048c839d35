-- Adds .N counts to their rows (minute, queue, kind, process), inserting
-- those missing, in one statement. Per row: minute (UTC text), queue,
-- kind, process, completed, retried, dead. The rows arrive as a derived
-- table whose columns the UPDATE reads: neither VALUES(), which MySQL
-- 8.0.20 deprecated, nor a row alias, which MariaDB lacks. A process
-- writes only rows of its own process id.
INSERT INTO {{table "activity"}} (minute, queue, kind, process, completed, retried, dead)
SELECT s.minute, s.queue, s.kind, s.process, s.completed, s.retried, s.dead
FROM ({{range $i := rows .N}}{{if $i}}
      UNION ALL {{end}}SELECT CAST(? AS DATETIME) AS minute, CAST(? AS CHAR(64)) AS queue, CAST(? AS BINARY) AS kind,
             CAST(? AS CHAR(32)) AS process, CAST(? AS SIGNED) AS completed, CAST(? AS SIGNED) AS retried, CAST(? AS SIGNED) AS dead{{end}}
) AS s
ON DUPLICATE KEY UPDATE
    completed = {{table "activity"}}.completed + s.completed,
    retried = {{table "activity"}}.retried + s.retried,
    dead = {{table "activity"}}.dead + s.dead
