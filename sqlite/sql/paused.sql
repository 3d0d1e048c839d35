-- Lists the paused queues in name order.
SELECT queue FROM {{table "queues"}} WHERE paused ORDER BY queue
