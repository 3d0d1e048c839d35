// Package sqlite is the SQLite dialect of dbq, on modernc.org/sqlite (pure
// Go, no cgo; database/sql driver name "sqlite"): the embedded default that
// `dbq demo` and the quick start run on, with no server.
//
//	q, err := sqlite.Open(ctx, "jobs.db", sqlite.Config{})
//	…
//	err = sqlite.Migrate(ctx, q.Driver().(*sqlite.Driver).DB(), sqlite.Config{})
//
// [Open] and [OpenDB] take a path or a DSN (sqlite:path, sqlite://path,
// sqlite:///abs/path; sqlite3: and file: likewise) with the driver's query
// parameters. Open sets on every connection journal_mode=WAL,
// synchronous=NORMAL (durable across a process crash; the last
// transactions may be lost on power failure), a busy timeout and BEGIN
// IMMEDIATE; with [New] the caller opens the *sql.DB and should use [DSN]
// for the same settings. Open refuses ":memory:": each pooled connection
// would get a database of its own.
//
// # One writer
//
// SQLite has one writer at a time per file. Every dbq write is short (a
// claim is one transaction of at most three statements; Complete, Retry,
// Release and Extend one statement per batch), and within a process the
// writers of one Queue take turns at a Go gate before they ask SQLite for
// the lock. Across processes the file lock decides, with a busy timeout
// ([BusyTimeout]); a SQLITE_BUSY that still gets through is a
// dialect.RetryableError. Many processes on one host may share a file; a
// network filesystem (NFS, SMB) may not.
//
// # Claims are leases
//
// A claim marks up to n ready jobs claimed with a lease (queue.Config.Lease)
// and a random token, in one write transaction over the partial claim
// index. Expired leases go back to ready inside claims (at most every
// quarter lease, and whenever a claim comes up short), so a dead
// claimer's jobs return as soon as anyone asks for work once its lease is
// over; [Driver.Rescue] does it on demand. A Claimer is a
// queue.CompleteClaimer: a Worker's waiting completions go in its claim's
// transaction, one write lock per batch.
//
// The one writer is also the limit of leases: a process stopped while it
// holds the write lock (SIGSTOP, a debugger, heavy swapping) stops every
// process's writes, renewals included. A stall longer than the lease lets
// live holders' leases run out, and their jobs run again once the lock is
// free. Keep the lease well above the longest stall you expect (the
// default is 5m).
//
// # Time
//
// Times are INTEGER microseconds since the Unix epoch, UTC, computed by
// the database, never by the Go clock.
//
// # More
//
// docs/sqlite.md has the design notes and measurements (the concurrency
// model, one write transaction per batch, time and SQL, decisions);
// docs/lifecycle.md maps each step of a job's life to this package's
// files.
package sqlite
