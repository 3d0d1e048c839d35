// Package sqlite is the SQLite dialect of dbq, on modernc.org/sqlite (pure
// Go, no cgo; database/sql driver name "sqlite"): the embedded default that
// `dbq demo` and the quick start run on, with no server.
//
//	q, err := sqlite.Open(ctx, "jobs.db", sqlite.Config{})
//	…
//	err = sqlite.Migrate(ctx, q.Driver().(*sqlite.Driver).DB(), sqlite.Config{})
//
// # Concurrency model
//
// SQLite has one writer at a time per database file. Every dbq write is
// short: a claim is one transaction of at most three statements, a
// CompleteClaim (below) one of at most four, and Complete, Retry, Release
// and Extend are one statement per batch. Within a
// process, the writers of one Queue take turns at a Go gate before they ask
// SQLite for the lock, so they queue in Go instead of sleeping in SQLite's
// busy handler (measured: worst claim latency a few milliseconds instead of
// up to two seconds at 16–64 claimers). Across processes, and against the
// user's own transactions, the file lock decides, with a busy timeout
// ([BusyTimeout]); a SQLITE_BUSY that still gets through is retried a few
// times with jitter and otherwise returned as a dialect.RetryableError.
//
// [Open] and [OpenDB] take a path or a DSN, sqlite:path, sqlite://path,
// sqlite:///abs/path (sqlite3: and file: likewise), with query parameters
// for the driver (dsn.go). [Open] sets, on every connection of its pool
// through the DSN ([DSN]): journal_mode=WAL (readers never block the
// writer, nor it them), synchronous=NORMAL (durable across a process
// crash; the last transactions may be lost on power failure),
// busy_timeout, and BEGIN IMMEDIATE for transactions. With [New], the caller opens the *sql.DB and
// should use [DSN] to get the same settings.
//
// Many processes on one host may share a file. A network filesystem (NFS,
// SMB) may not: WAL needs shared memory, and its locks are unreliable there.
//
// # Claims are leases
//
// A claim is `UPDATE … SET state='claimed', claim_token=?, claimed_until=now+lease
// WHERE id IN (SELECT id … WHERE queue=? AND state='ready' AND run_at<=now
// ORDER BY priority, run_at, id LIMIT n) RETURNING …` inside one write
// transaction, a range scan of the partial claim index. The token is a random
// int64 per Claim call; Complete, Retry, Release and Extend match
// (id, token, state claimed), so a holder whose lease expired and was taken
// back gets queue.ErrLeaseLost and changes nothing. A Claimer holds no
// connection between calls.
//
// Expired leases go back to ready (token cleared) in the claim transaction:
// at most every quarter lease, and also whenever a claim comes up short of
// n, so a dead claimer's jobs come back as soon as anyone asks for work
// once its lease is over. [Driver.Rescue] does the same on demand. A rescue
// counts the lost run as a failed attempt (see package queue). Stats counts
// an expired but not yet rescued job as ready, not held. Rescues need no
// lock of their own to run one at a time: each runs inside a write
// transaction, and SQLite has one writer at a time per file.
//
// That one writer is also the limit of leases here: a process stopped
// while it holds the write lock (SIGSTOP, a debugger, a machine swapping
// hard) stops every process's writes, renewals included, as a stopped
// database server would. A stall longer than the lease lets live holders'
// leases run out, and their jobs run again once the lock is free. Keep the
// lease well above the longest stall you expect (the default is 5m); the
// fault harness (internal/chaos) counts such a freeze as reaching every
// worker.
//
// # One write transaction per batch
//
// A Claimer is a queue.CompleteClaimer. A Worker sends the completions
// that wait when it claims with the claim, and CompleteClaim runs them in
// one BEGIN IMMEDIATE transaction: the DELETE of complete.sql, then what
// Claim runs (a rescue when due, the claim UPDATE), COMMIT. A draining
// Worker so takes the write lock once per batch instead of twice (the
// claim transaction, then an autocommit DELETE); its other writes are
// Extend every third of the lease (default every 100 s), Retry and
// Release for failed and given-back runs, and, with WorkerConfig.Activity,
// the activity and process rows. queue.CompleteClaimer has the completion
// commit before the claim starts; here the two commit together, and when
// the transaction fails after the DELETE ran (the claim or COMMIT failed,
// or SQLite rolled it all back, as it does on an interrupt) the completion
// is redone alone, so a failed claim still leaves it done. A DELETE that
// fails leaves the claim to run alone.
//
// Measured on a shared 2-core machine (load average 5-7 from other work),
// 50,000 no-op jobs, `dbq bench --sections drain --n 50000 --workers
// 1,2,4,8`, three runs interleaved with the code before CompleteClaim: 1,
// 2, 4 and 8 Workers drained 64,000-70,000, 62,000-73,000, 58,000-63,000
// and 64,000-72,000 jobs/s, against 23,000-52,000, 31,000-62,000,
// 20,000-55,000 and 52,000-65,000 before; one Worker made 1,000-1,170
// write transactions per drain instead of about 2,800. The floor (one
// `DELETE … WHERE id IN (SELECT … LIMIT 100)` per batch) drained
// 145,000-300,000, at best 275,000-300,000 per run, so dbq reaches about
// a quarter of it (a fifth before). Most of the gap is per job, not per
// transaction: a claim rewrites the row and moves it from the claim index
// to the lease index, and the completion deletes it from the table and
// the lease index, where the floor deletes a row and a claim index entry
// once. In ./bench (go test -bench, batches of 100, load 2-5): Claim
// 0.66-0.97 ms, Complete 345-359 µs, CompleteClaim 0.98-1.6 ms; the
// floor's DELETE of 100 rows about 350 µs. The Worker's claims average
// 35-50 jobs when handlers are this fast, since a claim takes the handler
// slots free at the time.
//
// # Time and SQL
//
// Times are INTEGER microseconds since the Unix epoch, UTC, computed by the
// database (`unixepoch('subsec')`, millisecond resolution), never by the Go
// clock. The statements are embedded files in sql/ (and sql/move/ for
// package move), one per statement, rendered by dialect.LoadSQL; the only
// text spliced into them is the validated, quoted table names. Batches
// travel as one JSON parameter read by json_each, so a batch is one
// statement of fixed text, prepared once per connection. Leases go as
// {"token":[id,…],…}: json_each then yields the ids as integers and parses
// each claim's group once ([[id,token],…] made it parse every lease
// again, a third of a Complete's time).
//
// # Decisions
//
//   - NewClaimer touches no table, so on an unmigrated file it succeeds and
//     the first Claim returns queue.ErrNotMigrated.
//   - A Claimer's Close releases the jobs it still holds (those it claimed
//     and has not ended or lost). A second Close returns queue.ErrClosed.
//   - Enqueue accepts a nil tx or a *sql.Tx; ids come back in input order
//     (AUTOINCREMENT, one VALUES list per chunk of 500, under the write lock).
//   - Pause is a row in the queues table
//     (migrations/sqlite/00002_queues.sql); Claim skips a paused queue
//     with one primary-key probe, Stats reports it.
//   - A snoozed job (Retry with Snooze) is ready again after its delay with
//     attempt and last_error unchanged.
//   - EnqueueUnique is INSERT … ON CONFLICT DO NOTHING, then a lookup of the
//     existing job; under the write lock that job cannot vanish in between,
//     and in a caller's *sql.Tx the conflict does not abort it.
//   - Cancel deletes only jobs whose state is not claimed. A job whose lease
//     expired but was not yet rescued still counts as held.
//   - Open refuses ":memory:" databases: each pooled connection would get a
//     database of its own.
package sqlite
