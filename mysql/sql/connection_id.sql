-- The id of the claimer's own session (tests find its locks by it).
SELECT CONNECTION_ID()
