-- identity_host: identity.sql where the server has no @@server_uuid
-- (MariaDB): the host name, port and data directory name the server.
SELECT CONCAT(@@hostname, ':', @@port, ':', @@datadir), DATABASE()
