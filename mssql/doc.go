// Package mssql is the SQL Server dialect of dbq, on
// github.com/microsoft/go-mssqldb. [New] takes the caller's *sql.DB,
// [Open] a sqlserver:// DSN; [Migrate] creates the tables.
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
// 300 leases, 250 new jobs), far below the 5,000 locks at which SQL Server
// would escalate anyway.
//
// # The claim (SEEDS 003, made crash-safe)
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
// every row locked by anyone. The seed's form, DELETE TOP (n) jobs
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
// The seed's DELETE would lose a job whose worker died after the delete.
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
// rescue statement at most every quarter lease, so no separate reaper is
// needed; [Driver.Rescue] runs it on demand. The run that lost its lease
// counts as a failed attempt (as in River and Oban): a job that keeps
// killing its workers ends dead instead of looping.
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
// usable) or its own — 250 jobs per INSERT, and returns the ids in input
// order: they are drawn from the sequence in input order.
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
package mssql
