-- identity: the server, by MySQL's @@server_uuid, and the current
-- database, which with the jobs table's name say where the jobs are stored.
SELECT @@server_uuid, DATABASE()
