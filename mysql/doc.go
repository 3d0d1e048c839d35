// Package mysql is the dbq dialect for MySQL 8.0.13+ and MariaDB 10.6+
// (Galera clusters and TiDB included), on github.com/go-sql-driver/mysql.
//
//	q, err := mysql.Open(ctx, "mysql://dbq:secret@db:3306/app", mysql.Config{})
//	// or, on a *sql.DB of your own:
//	q, err := mysql.New(db, mysql.Config{Replica: replicaDB})
//
// Migrate (or `dbq migrate up`) creates the tables; OpenDB gives a
// *sql.DB for migrations and database/sql producers. New reads SELECT
// VERSION(), refuses a server without SKIP LOCKED
// (queue.ErrUnsupportedServer) and logs what it runs on ([Driver.Server]).
//
// # The claim
//
// A claim reads the ids of the first ready jobs of its queue outside any
// transaction (optionally on Config.Replica), then, in one READ COMMITTED
// transaction, locks a sample of them by primary key with FOR UPDATE SKIP
// LOCKED and marks them claimed with a lease and a token; it returns only
// the rows its UPDATE changed, so nothing rests on the locks (on TiDB,
// whose SKIP LOCKED locks nothing, the same claim stays exactly-once).
// Under contention each claimer spreads its sample over a wider window of
// candidates (Config.MaxSpread), so claimers stop picking the same rows.
// A dead claimer's jobs come back when their lease (queue.Config.Lease)
// expires: Claim runs a bounded rescue pass at most every quarter lease,
// one session at a time per table; Driver.Rescue does it on demand.
//
// # Knobs
//
// Config.Replica serves candidate reads; Config.MaxSpread bounds the
// spread (1 turns it off); Config.RescueBatch caps one rescue pass;
// Config.LockWaitTimeout is innodb_lock_wait_timeout for the claimer's
// session and Open's pool. The table names come from queue.Config.
//
// # Connections
//
// Each Claimer holds one connection of the pool for its life and closes
// it when done, so no session of the pool carries a setting of dbq's;
// every other call takes a connection for the call only. The pool must
// hold each Claimer's connection and one more: NewClaimer fails with
// ErrPoolTooSmall (a queue.ErrInvalidConfig) when SetMaxOpenConns is
// below that.
//
// # Errors
//
// A missing table is queue.ErrNotMigrated, a dedupe collision
// queue.ErrDuplicate; deadlocks, lock wait timeouts, Galera certification
// failures and TiDB write conflicts are a *dialect.RetryableError, each
// wrapping the *mysql.MySQLError.
//
// # More
//
// docs/mysql.md has the design notes and measurements (the claim step by
// step, completing with the next claim, spreading the claimers, leases and
// rescue, MySQL and MariaDB differences, Galera, connections, producers in
// other languages, kinds); docs/scale-out.md covers Galera and TiDB;
// docs/lifecycle.md maps each step of a job's life to this package's
// files.
package mysql
