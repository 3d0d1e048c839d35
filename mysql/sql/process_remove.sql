-- Deletes a process's row, at its clean exit.
DELETE FROM {{table "processes"}} WHERE id = ?
