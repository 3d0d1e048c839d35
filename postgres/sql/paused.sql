SELECT queue FROM {{table "queues"}} WHERE paused ORDER BY queue
