-- Gives the table's rescue lock back, on the session that took it.
SELECT RELEASE_LOCK(?)
