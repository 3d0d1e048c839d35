SELECT queue FROM {{queues}} WHERE paused ORDER BY queue
