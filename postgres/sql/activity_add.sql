-- Adds a batch of counts to their rows (minute, queue, kind, process),
-- inserting those missing: one statement, each column an array. A process
-- writes only rows of its own process id, so no other writer waits here.
INSERT INTO {{table "activity"}} AS a (minute, queue, kind, process, completed, retried, dead)
SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::int8[], $6::int8[], $7::int8[])
ON CONFLICT (minute, queue, kind, process) DO UPDATE
SET completed = a.completed + excluded.completed,
    retried = a.retried + excluded.retried,
    dead = a.dead + excluded.dead
