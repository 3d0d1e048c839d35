-- take: writes nothing, but as a write it takes the database's write lock
-- at once, so no claim can change a row the export batch reads.
UPDATE {{table "jobs"}} SET id = id WHERE id = -1
