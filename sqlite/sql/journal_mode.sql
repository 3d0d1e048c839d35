-- The journal mode of the database, read once by Open to warn when it is
-- not WAL.
PRAGMA journal_mode
