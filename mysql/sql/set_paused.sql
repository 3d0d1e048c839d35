-- Pauses (? true) or resumes queue ?: an upsert of its row in the queues
-- table. The flag is passed twice rather than read back with VALUES(),
-- which MySQL 8.0.20 deprecated, or a row alias, which MariaDB lacks.
INSERT INTO {{table "queues"}} (queue, paused, updated_at)
VALUES (?, ?, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE paused = ?, updated_at = UTC_TIMESTAMP(6)
