-- What the dialect needs to know about the server, read once by New, and
-- the session's default database (the schema of an unqualified table).
SELECT VERSION(), @@innodb_autoinc_lock_mode, @@auto_increment_increment, @@max_allowed_packet, DATABASE()
