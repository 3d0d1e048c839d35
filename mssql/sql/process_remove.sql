-- process_remove: delete process @id's row, at its clean exit.
SET NOCOUNT ON;
DELETE FROM {{table "processes"}} WHERE id = @id;
