-- address: where pg_control_system() is not granted (identity.sql), the
-- server's address (or "local" over a socket) and port instead, and the
-- database.
SELECT coalesce(host(inet_server_addr()), 'local') || ':' || current_setting('port'), current_database()
