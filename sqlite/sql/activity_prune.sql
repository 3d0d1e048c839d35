-- Deletes at most ?2 activity rows of minutes before ?1 (µs), the oldest
-- first: a bounded delete, so a long backlog is pruned a batch per flush.
DELETE FROM {{table "activity"}}
WHERE (minute, queue, kind, process) IN (
    SELECT minute, queue, kind, process FROM {{table "activity"}}
    WHERE minute < ?1
    ORDER BY minute
    LIMIT ?2
)
