-- Lists the paused queues in name order.
SELECT queue FROM {{queues}} WHERE paused ORDER BY queue
