-- The paused queues in name order (the queues table's primary key).
SELECT queue FROM {{.Queues}} WHERE paused ORDER BY queue
