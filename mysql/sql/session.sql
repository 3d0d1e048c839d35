-- Each claimer's own connection. Its plain reads — the candidate selects of
-- claims and rescues, which take no locks and are re-checked under a lock
-- before anything is decided — run in READ UNCOMMITTED (READ COMMITTED on
-- TiDB, which refuses READ UNCOMMITTED): they see a row
-- another claimer is claiming as gone the moment its UPDATE runs (InnoDB
-- skips the delete-marked index entry), and they read the claim index as
-- it stands, with no undo lookups for rows changed since a read view.
-- Every transaction on it starts READ COMMITTED explicitly. Its statements
-- never wait on a row lock (SKIP LOCKED, or rows it holds); the lock wait
-- timeout bounds the unexpected.
SET SESSION TRANSACTION ISOLATION LEVEL {{.CandidateIsolation}};
SET SESSION innodb_lock_wait_timeout = {{.LockWaitSeconds}}
