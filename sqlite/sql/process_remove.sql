-- Deletes process ?1's row, at its clean exit.
DELETE FROM {{table "processes"}} WHERE id = ?1
