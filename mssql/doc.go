// Package mssql is the SQL Server dialect of dbq, on
// github.com/microsoft/go-mssqldb. [New] takes the caller's *sql.DB,
// [Open] a DSN in any form go-mssqldb reads (a sqlserver:// URL, an ADO
// string, odbc:); [Migrate] creates the tables.
//
// # Files
//
// Each step has the file it has in the other dialects: mssql.go (Config,
// New, Open, Migrate, Driver), dsn.go (reading a DSN), enqueue.go,
// claim.go (both strategies: they differ only in their statement),
// rescue.go, admin.go, schedule.go, move.go, errors.go (error numbers,
// classification, the retry of lock conflicts) and sql.go (the statement
// table). Every statement is a file in sql/, package move's in sql/move/,
// rendered by dialect.LoadSQL.
//
// # Tables
//
// Ready and dead jobs live in prefix+"jobs", clustered in claim order
// (queue, state, priority, run_at, id), with a unique index on id. Claimed
// jobs live in prefix+"jobs_inflight", with their lease token and
// claimed_until. A job's dedupe key is recorded in prefix+"jobs_dedupe"
// from enqueue to completion, so it stays unique per queue while the job
// moves between the other two tables. Ids come from a sequence, so a row
// keeps its id when it moves. Lock escalation is disabled on every table,
// and no statement touches more than 1,000 rows ([MaxClaim], [RescueBatch],
// 250 leases, 250 new jobs, 1,000 ids), far below the 5,000 locks at which
// SQL Server would escalate anyway. prefix+"queues" has a row for each
// queue ever paused or resumed.
//
// Both strategies hold a claimed job the same way: in jobs_inflight. So
// wherever this package counts, lists, dedupes or cancels held jobs, they
// are the rows of jobs_inflight, whatever [Config.Strategy] claimed them.
//
// # The claim (a randomized top-X DELETE, made crash-safe)
//
// A claim is one autocommit statement, sql/claim.sql:
//
//	DELETE TOP (@n) j
//	OUTPUT deleted.*, @token, now + lease INTO jobs_inflight (...)
//	OUTPUT deleted.*, now + lease
//	FROM jobs AS j WITH (NOWAIT, ROWLOCK, FORCESEEK)
//	WHERE j.id IN (SELECT TOP (@n) r.id
//	               FROM (SELECT TOP (@window) id FROM jobs WITH (READPAST, READCOMMITTEDLOCK)
//	                     WHERE queue = @queue AND state = 'ready' AND run_at <= SYSUTCDATETIME()
//	                       AND NOT EXISTS (SELECT 1 FROM queues AS p
//	                                       WHERE p.queue = @queue AND p.paused = 1)
//	                     ORDER BY priority, run_at, id) AS r
//	               ORDER BY CHECKSUM(NEWID()))
//	  AND j.state = 'ready' AND j.run_at <= SYSUTCDATETIME()
//
// It picks n jobs at random among the first Window ready ones (Window ≈
// 100 × claimers, [Config.Window]), so concurrent claimers seldom want the
// same row, and returns the batch sorted in claim order. Table hints cover
// only the reference they sit on, so each reference has its own. The inner
// read's READPAST skips rows other claimers are deleting instead of
// waiting for them, and READCOMMITTEDLOCK keeps that true when the
// database reads committed snapshots (the Azure SQL default), where the
// read would otherwise pick versions of rows already being claimed. The
// DELETE names its target in FROM so that it may carry FORCESEEK: it finds
// the picked rows through the unique index on id and touches no other row,
// where a scan — the optimizer's choice for a small table — would meet
// every row locked by anyone. The plain form, DELETE TOP (n) jobs
// WITH (NOWAIT), allows no FORCESEEK on its target.
//
// When a picked row is locked all the same, NOWAIT fails the statement at
// once with error 1222 instead of waiting; a deadlock fails it with 1205.
// Either way the statement is rolled back — rows OUTPUT had already sent
// are discarded, which is why every row is read and rows.Err checked — and
// Claim runs it again with a new pick after a pause of a few random
// milliseconds, at most [Config.ClaimAttempts] times; then it returns an
// error that queue.IsRetryable reports. go-mssqldb reports the last error
// of a request and lists all of them in mssql.Error.All: the dialect looks
// for 1222 and 1205 in All.
//
// [UpdLock] swaps in the dequeue of Hangfire, Rebus and NServiceBus for
// comparison: the first n unlocked ready rows in order,
// WITH (UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK), moved the same
// way.
//
// # Crash safety
//
// A plain DELETE would lose a job whose worker died after the delete.
// Here the same statement writes the deleted row into jobs_inflight with a
// random token and claimed_until = now + [queue.Config.Lease], on the
// database clock, so the move is atomic and the job is never only in a
// worker's memory. Complete deletes the row from jobs_inflight (and frees
// its dedupe key) where id and token match; Retry and Release move it
// back by id and token with DELETE ... OUTPUT INTO, keeping its id; Extend
// renews claimed_until. Each seeks its rows by key (FORCESEEK), so it locks
// only them, and runs again if chosen as a deadlock victim. A lease that no
// longer matches changes nothing and is reported in a
// *queue.LeaseLostError.
//
// A claimer that dies leaves its rows in jobs_inflight until their lease
// expires; then a rescue moves them back (sql/rescue.sql). Claim runs one
// rescue pass at most every quarter lease, so no separate reaper is
// needed; [Driver.Rescue] runs passes on demand. The run that lost its
// lease counts as a failed attempt (as in River and Oban): a job that
// keeps killing its workers ends dead instead of looping.
//
// One pass at a time runs over a table, across every process: a pass that
// sees an expired lease (an index seek, which also finds a missing table
// before any transaction begins) opens a transaction and asks for the
// table's application lock with sp_getapplock, @LockMode 'Exclusive',
// @LockOwner 'Transaction', @LockTimeout 0. Its name, a bind parameter, is
// "dbq.rescue:" and the quoted, qualified jobs_inflight table, well under
// the 255 characters the procedure keeps (a longer one would be replaced by
// its SHA-256). A pass not granted the lock at once (return code < 0, no
// error raised) moves nothing, and Rescue stops: the pass that holds it is
// doing the work. A granted pass moves at most [RescueBatch] jobs; COMMIT
// releases the lock, as does the rollback that XACT_ABORT makes of an error
// or a cancelled request, so no lock outlives its pass.
//
// A Claim whose result is lost on the way — its context cancelled, its
// connection cut — may have committed. It then moves back whatever its
// token claimed (sql/abandon.sql), so an interrupted claim leaves no claim
// behind; if even that fails, the lease expires as for a dead claimer.
// Delivery is at least once: a job runs twice only when its holder lost
// its lease.
//
// # Enqueue
//
// Enqueue inserts a batch in one transaction — the caller's *sql.Tx
// (inside a savepoint, so a duplicate key leaves the caller's transaction
// usable) or its own — 200 jobs per INSERT, and returns the ids in input
// order: they are drawn from the sequence in input order.
//
// # Admin, pause and snooze
//
// [Driver] implements queue.Admin; each method is one statement file.
//
//   - EnqueueUnique (sql/enqueue_unique.sql) reads the job's key in
//     jobs_dedupe WITH (UPDLOCK, HOLDLOCK): the key's row, or the gap where
//     it would be, stays locked to the end of the transaction. If it is
//     there, its id is the answer, and its job cannot complete and free it
//     meanwhile; if not, the job and its key are inserted, and a racing
//     enqueue of the same key waits and then finds it. So it never meets a
//     duplicate key, needs no retry when the job found vanishes (it cannot),
//     and sets no XACT_ABORT: nothing in it aborts the caller's transaction,
//     and it runs there inside a savepoint, as Enqueue does. In the
//     caller's transaction the key stays locked until that transaction
//     ends. In its own, a deadlock victim runs again.
//   - Jobs (sql/jobs.sql) reads jobs (ready, scheduled, dead) and
//     jobs_inflight (claimed, with token and lease) as one UNION ALL in id
//     order. Its filters (queue, state, kind) are bind parameters, planned
//     per call with OPTION (RECOMPILE). A job that moves between the tables
//     during the read may be listed in either state, never twice.
//   - StatsByKind (sql/stats_by_kind.sql) counts as Stats does, per queue
//     and kind: one row per pair that holds a job, so as many rows as
//     kinds in use.
//   - Cancel (sql/cancel.sql) deletes, by id, rows of jobs only — held jobs
//     are in jobs_inflight — and their dedupe keys, in one XACT_ABORT
//     transaction.
//   - RetryDead revives dead jobs of one queue — ready now, attempt 0,
//     last_error kept — by id (sql/retry_dead_ids.sql) or, with no ids,
//     all of them (sql/retry_dead_all.sql), 1,000 a statement.
//   - SetPaused (sql/set_paused.sql) updates the queue's row of queues
//     WITH (UPDLOCK, HOLDLOCK) and inserts it if the update found none, in
//     one transaction: the key-range lock keeps two first calls from both
//     inserting. Paused (sql/paused.sql) lists paused queues by name.
//
// Both claim statements read the queue's row of queues themselves (NOT
// EXISTS ... paused = 1, a primary-key probe), so a paused queue's claim
// returns nothing at no extra round trip; Stats reports Paused the same
// way. Enqueue, Complete, Retry and Release go on while a queue is paused.
//
// Retry with RetryParams.Snooze moves the job back like any retry
// (sql/retry.sql, matched on id and token, so a stale holder's snooze
// changes nothing and reports queue.ErrLeaseLost) but ready at now +
// Delay on the database clock, with attempt and last_error as they were.
//
// # Testing without a server
//
// No SQL Server runs where dbq is developed, so the tests check what they
// can without one: every statement is parsed with
// github.com/sqlc-dev/teesql and its tree is checked (statement kinds, TOP,
// the hints on each table reference, OUTPUT and OUTPUT INTO and their
// columns against the migration's tables), and the error classification
// and the retry loop run on built mssql.Error values. TestConformance runs
// the dbq conformance suite, and this package's live tests, wherever
// DBQ_MSSQL_DSN (default: the docker-compose.yml service) answers.
//
// # Babelfish for PostgreSQL
//
// Babelfish (T-SQL and TDS on a modified PostgreSQL; Aurora PostgreSQL
// offers it, and scripts/babelfish.sh runs one for `make test-babelfish`)
// is a server dbq runs on, and the one where this package's statements
// first ran. The Driver asks once (SERVERPROPERTY('babelfish')) and there
// sends the forms in sql/babelfish/ in place of claim, claim_updlock,
// enqueue, retry, release, rescue and the import's insert, because
// Babelfish 4.4:
//   - takes no second OUTPUT clause beside OUTPUT ... INTO (syntax error
//     at or near "OUTPUT"): a claim moves its rows with OUTPUT INTO and
//     then reads them back by its token; retry, release and rescue output
//     into a table variable and insert from it, in one transaction;
//   - takes in OUTPUT neither a CASE over deleted's columns nor a column of
//     a joined table ("missing FROM-clause entry");
//   - rejects NEXT VALUE FOR ... OVER (ORDER BY ...): ids are drawn in an
//     INSERT ... SELECT ... ORDER BY, which PostgreSQL evaluates in order;
//   - fails a DELETE through a CTE ("stack depth limit exceeded"), and an
//     IN (random TOP pick) inside a DELETE matched fewer rows than the pick
//     held: both claims pick into a table variable first;
//   - ignores the name of a DEFAULT constraint
//     (escape_hatch_constraint_name_for_default), so 00005's down drops it
//     IF EXISTS;
//   - reports a missing table as error 33557097 "relation ... does not
//     exist" (classified as queue.ErrNotMigrated, as 208 is).
//
// Locking there is PostgreSQL's, and table hints do nothing:
// babelfishpg_tsql.escape_hatch_table_hints is ignore by default, and a
// session set to strict still ran ROWLOCK, READPAST, UPDLOCK, HOLDLOCK and
// NOWAIT (Babelfish 4.4). The Babelfish forms carry no hint; the other
// statements keep theirs, where they are ignored. The Babelfish claims set
// LOCK_TIMEOUT 200 around their DELETE instead of NOWAIT (Babelfish maps it
// to PostgreSQL's lock_timeout): a DELETE that reaches a row another claim
// or an export holds fails within 200 ms with "canceling statement due to lock timeout"
// (33557097), which is retried as 1222 is; there is no READPAST, so rows
// held elsewhere are met, not skipped, and an export locks its rows with
// a no-op UPDATE (sql/babelfish/move_export.sql). A claim there runs to
// its end whatever its context does and gives back what it took once the
// context has ended. What a run there
// shows is the statements, types, OUTPUT, the driver path, transactions,
// migrations and exactly-once under PostgreSQL's locking — not SQL
// Server's lock behaviour (NOWAIT and 1222, READPAST, READCOMMITTEDLOCK,
// lock escalation), which only SQL Server (make test-compose) shows.
// https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/babelfish-compatibility.tsql.limitations.html
// https://babelfishpg.org/docs/usage/limitations-of-babelfish/
package mssql
