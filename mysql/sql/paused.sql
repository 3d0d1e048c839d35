-- The paused queues in name order (the queues table's primary key).
SELECT queue FROM {{table "queues"}} WHERE paused ORDER BY queue
