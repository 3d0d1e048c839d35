-- The server process of the connection: ownSession compares two
-- connections' to tell whether a transaction pooler shares sessions.
SELECT pg_backend_pid()
