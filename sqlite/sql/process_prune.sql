-- Deletes the processes not seen since ?1 (µs): gone long enough.
DELETE FROM {{table "processes"}} WHERE seen_at < ?1
