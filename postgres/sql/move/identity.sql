-- identity: the cluster's system identifier (the same however the server
-- is reached), and the database.
SELECT system_identifier::text, current_database() FROM pg_control_system()
