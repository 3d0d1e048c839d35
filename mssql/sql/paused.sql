-- paused: the paused queues, in name order (binary, as queue names compare).
SELECT queue FROM {{table "queues"}} WHERE paused = 1 ORDER BY queue;
