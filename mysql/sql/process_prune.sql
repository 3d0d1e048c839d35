-- Deletes the processes not seen since ? (UTC text): gone long enough.
DELETE FROM {{table "processes"}} WHERE seen_at < CAST(? AS DATETIME(6))
