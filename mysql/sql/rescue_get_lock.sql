-- Takes the table's rescue lock for this session if no other session holds
-- it: 1 taken, 0 held elsewhere (timeout 0: never waits). The name, at
-- most 64 characters, is derived from the database and table names.
SELECT GET_LOCK(?, 0)
