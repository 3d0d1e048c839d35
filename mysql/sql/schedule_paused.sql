-- The paused flag of schedule name, read in the transaction that just
-- advanced (and locked) its row.
SELECT paused FROM {{table "schedules"}} WHERE name = ?
