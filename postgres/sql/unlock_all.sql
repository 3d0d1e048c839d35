-- Releases every session advisory lock, when an advisory claimer closes
-- and gives its connection back to the pool.
SELECT pg_advisory_unlock_all()
