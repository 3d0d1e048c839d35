-- identity: the server's name and the current database, which with the
-- jobs table's name say where the jobs are stored.
SELECT COALESCE(@@SERVERNAME, CAST(SERVERPROPERTY('ServerName') AS NVARCHAR(128))), DB_NAME();
