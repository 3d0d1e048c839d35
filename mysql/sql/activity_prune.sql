-- Deletes at most ? activity rows of minutes before ? (UTC text), the
-- oldest first: a bounded delete, so a long backlog is pruned a batch per
-- flush.
DELETE FROM {{table "activity"}}
WHERE minute < CAST(? AS DATETIME)
ORDER BY minute
LIMIT ?
