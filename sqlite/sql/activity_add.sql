-- Adds a batch of counts to their rows (minute, queue, kind, process),
-- inserting those missing, in one statement of one parameter: ?1 is a
-- JSON array of {"m": minute µs, "q", "k", "p", "c", "r", "d"}. A process
-- writes only rows of its own process id. "WHERE true" keeps ON CONFLICT
-- from reading as a join's ON.
INSERT INTO {{table "activity"}} AS a (minute, queue, kind, process, completed, retried, dead)
SELECT json_extract(value, '$.m'), json_extract(value, '$.q'), json_extract(value, '$.k'),
       json_extract(value, '$.p'), json_extract(value, '$.c'), json_extract(value, '$.r'),
       json_extract(value, '$.d')
FROM json_each(?1) WHERE true
ON CONFLICT (minute, queue, kind, process) DO UPDATE
SET completed = a.completed + excluded.completed,
    retried = a.retried + excluded.retried,
    dead = a.dead + excluded.dead
