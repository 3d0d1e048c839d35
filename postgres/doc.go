// Package postgres is the PostgreSQL dialect of dbq, on pgx/v5.
//
//	pool, err := pgxpool.New(ctx, "postgres://app@db/app")
//	...
//	err = postgres.Migrate(ctx, pool, postgres.Config{}) // or `dbq migrate up`
//	q, err := postgres.New(pool, postgres.Config{})      // or postgres.Open(ctx, dsn, cfg)
//	ids, err := q.Enqueue(ctx, queue.NewJob{Queue: "email", Payload: body})
//
// New works on a pool you own; Open makes one of its own from a DSN, which
// Queue.Close closes; OpenDB gives a *sql.DB for migrations and
// database/sql producers. The test suite runs on PostgreSQL 15, 17 and 18.
//
// # Two claim strategies
//
// Advisory (the default) claims a job by taking a session advisory lock
// on it: nothing is written to claim a job, claimers never wait on each
// other, and a dead claimer's jobs are claimable again the moment its
// connection closes. It holds one connection per claimer for the
// claimer's life, and needs a session of its own: behind a transaction
// pooler (PgBouncer in transaction mode) it refuses to start with
// queue.ErrUnsupportedServer and says what to use instead.
//
// SkipLocked claims with one statement (SELECT … FOR UPDATE SKIP LOCKED,
// then an UPDATE that writes a lease and a token), as River and Oban do.
// It keeps no session state, so it works behind a transaction pooler
// (with default_query_exec_mode=exec in the DSN and Config.NoNotify); a
// dead claimer's jobs come back when their lease (Config.Lease) expires.
//
// Every worker on one table must use the same strategy: neither sees the
// other's claims.
//
// # Knobs
//
// Config.Strategy picks the claimer; Config.Lease (from queue.Config;
// SkipLocked) is how long a claim lasts unrenewed; Config.LockCheck (Advisory) how often a
// Worker's lock connection is checked, which bounds how long a lost
// connection's jobs can run twice (at most two thirds of it); Config.NoNotify
// turns off LISTEN/NOTIFY wake-ups; Config.HorizonWarn is when the
// "horizon" check fails. The table names and schema come from
// queue.Config (Prefix, Schema).
//
// # What else the Driver is
//
// A queue.Waker (enqueues NOTIFY on commit; Workers wake at once), a
// queue.Mover (package move), and a queue.HealthReporter and
// queue.Checker: Health tells what holds the MVCC horizon back and the
// jobs table's dead and live rows (docs/postgres-health.md).
//
// # Errors
//
// A missing table or schema is queue.ErrNotMigrated, a dedupe collision
// queue.ErrDuplicate, and serialization failures, deadlocks and lock
// timeouts a *dialect.RetryableError; each wraps the *pgconn.PgError.
//
// # More
//
// docs/postgres.md has the design notes and measurements behind the two
// claimers (the walk and its post-check, the plan settings, where a claim
// starts, the pooler checks); docs/lifecycle.md maps each step of a job's
// life to this package's files.
package postgres
