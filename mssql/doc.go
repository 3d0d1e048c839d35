// Package mssql is the SQL Server dialect of dbq, on
// github.com/microsoft/go-mssqldb, for SQL Server and Azure SQL (the
// compose tests run SQL Server 2022), and Babelfish for PostgreSQL.
//
//	q, err := mssql.Open(ctx, "sqlserver://dbq:secret@db:1433?database=app", mssql.Config{})
//	// or, on a *sql.DB of your own:
//	q, err := mssql.New(db, mssql.Config{})
//
// [Open] takes a DSN in any form go-mssqldb reads (a sqlserver:// URL, an
// ADO string, odbc:); [New] the caller's *sql.DB; [Migrate] (or `dbq
// migrate up`) creates the tables.
//
// # Tables and the claim
//
// Ready and dead jobs live in prefix+"jobs", clustered in claim order;
// claimed jobs move to prefix+"jobs_inflight" with their lease; dedupe
// keys are kept in prefix+"jobs_dedupe" while a job lives. A claim is one
// autocommit statement: a DELETE TOP over a random pick among the first
// ready jobs (READPAST, so claimers skip each other's rows, NOWAIT so none
// waits) whose OUTPUT inserts the rows into jobs_inflight with a token and
// a lease — crash-safe, since the move is one statement. Strategy UpdLock
// picks with UPDLOCK instead. A dead claimer's jobs return when their
// lease (queue.Config.Lease) expires: claims rescue expired leases as they
// go, Driver.Rescue on demand. No statement touches more than 1,000 rows,
// and lock escalation is disabled on every table.
//
// # Knobs
//
// Config.Strategy picks the claim; Config.Claimers and Config.Window size
// the random pick (how many claimers to expect, how far past the head a
// claim looks); Config.ClaimAttempts bounds the retries of a claim that
// met a lock conflict. Table names and schema come from queue.Config.
//
// # Errors
//
// A missing table is queue.ErrNotMigrated (208), a dedupe collision
// queue.ErrDuplicate; lock timeouts (1222), deadlocks (1205) and the like
// are a *dialect.RetryableError wrapping the mssql.Error.
//
// # Where it has run
//
// The statements are parsed and their trees checked without a server in
// every test run; TestConformance and the live tests run wherever
// DBQ_MSSQL_DSN answers (SQL Server 2022 in docker-compose.yml, `make
// test-compose`) and on Babelfish for PostgreSQL (`make test-babelfish`,
// scripts/babelfish.sh), where the Driver sends the forms in
// sql/babelfish/. A run on Babelfish shows the statements, types, OUTPUT,
// the driver path, transactions, migrations and exactly-once under
// PostgreSQL's locking — not SQL Server's lock behaviour (NOWAIT and 1222,
// READPAST, lock escalation).
//
// # More
//
// docs/sqlserver.md has the design notes (tables, the claim, crash
// safety, enqueue, admin, testing without a server, and each Babelfish
// difference with links); docs/lifecycle.md maps each step of a job's life
// to this package's files.
package mssql
