// Package queue is the database-independent heart of dbq: the Job, the
// Claimer contract every dialect implements, the Queue that enqueues and
// counts jobs, and the Worker that runs them. It imports no database
// driver; a dialect package (postgres, mysql, mssql, sqlite) supplies one
// and returns a *Queue from its New or Open.
//
// # Life of a job
//
// Enqueue stores a job ready (or scheduled, when its run_at is in the
// future). A Claimer claims it; the claim carries a token. The holder ends
// the claim with Complete (the job is deleted: finished jobs leave the hot
// table), Retry (attempt+1, run again after a backoff, dead once
// max_attempts runs have failed; dead jobs stay for inspection) or Release
// (back as it was, no attempt spent). Each of these presents the token, so
// a holder whose claim was lost — its lease expired and someone else
// claimed the job, or its connection and with it its lock died — gets
// ErrLeaseLost and changes nothing.
//
// # Delivery
//
// While no claimer dies, every job is completed exactly once. A claimer that
// dies gives its jobs back — at once where the claim is a lock (PostgreSQL
// advisory locks), when the lease expires where it is a lease — so nothing
// is lost, and a job may run twice only if its holder died or stalled
// holding it. Handlers should therefore be idempotent.
//
// A run that lost its lease counts as a failed attempt (attempt + 1, the
// error "lease expired" kept, dead after max_attempts), as in River and
// Oban: a job that keeps killing its workers ends dead instead of looping.
// A claim that is a lock (PostgreSQL advisory) writes nothing when it is
// taken, so a claimer that dies there spends no attempt: its jobs simply
// become claimable again.
//
// # Running jobs
//
// A [Worker] runs a [Handler] per job on Concurrency goroutines. It claims
// when it has free slots — again at once after a claim that filled its
// batch, else after PollInterval with jitter, or sooner when the driver is a
// [Waker] and jobs were enqueued — renews leases while handlers run, writes
// results in batches, and on shutdown stops claiming and releases what it
// could not finish. A handler's error retries the job, [Permanent] makes it
// dead, [Snooze] runs it again later without spending an attempt. [Hooks]
// observe claims and runs for metrics (package metrics) and tracing.
//
// # Typed jobs
//
// A job may have a kind: the name of what it is, stored in its own column.
// [Args] types name their kind; a [Kinds] registry maps kinds to typed
// handlers ([Handle]) and per-kind defaults (queue, priority, max attempts,
// timeout), encodes Args into payloads (JSON unless KindsConfig.Codec says
// otherwise) and gives the one [Handler] with which a Worker runs every
// kind of its queue. A job whose kind no handler in the process knows is
// not completed and not lost: it fails with [ErrUnknownKind], is retried
// with backoff — a rolling deploy may be adding the handler — and is dead
// after its attempts, where `dbq dead retry` or the dashboard revive it.
// A payload that does not decode is dead at once ([ErrBadArgs]): no retry
// can fix it. The raw API (NewJob, Handler on *Job) stays for payloads
// that are only bytes; kind is then empty, or set by hand on NewJob.
//
// Kinds are names in code, so metrics labelled by kind stay few; package
// metrics still caps them at 200 (queue, kind) pairs and counts the rest
// as "other", in case kinds are ever made from data.
//
// # Implementing a dialect
//
// A dialect implements [Driver] and [Claimer], every method of both (the
// contract is in one place: driver.go, and `go doc` lists it under those
// two types), and passes the conformance suite in package integration.
// Checklist:
//
//   - Claim is one index range scan in (queue, priority, run_at, id) order
//     that never waits on a row another claimer holds; time comparisons use
//     the database clock.
//   - Complete, Retry, Release and Extend run one statement per batch, match
//     (id, token), and report misses with [LostLeases].
//   - A cancelled context leaves no lock, claim or transaction behind.
//   - Map driver errors: missing table to ErrNotMigrated, unique violation
//     on the dedupe key to ErrDuplicate, deadlocks and lock timeouts to a
//     dialect.RetryableError (see [IsRetryable]). Never put a DSN password
//     in an error.
//   - Claimer.Heartbeat says how often the Worker calls Extend: a third of
//     the lease for leases; for locks that live in a connection, how often
//     Extend checks that connection (reporting every lease lost when it is
//     gone).
//   - Nothing of the claimer's outlives a call on a connection the user can
//     see: no session setting, lock or transaction; every wait for a pool
//     connection or the server follows the ctx given.
//   - What a database cannot do (move jobs, keep activity, schedules), its
//     method answers with an error wrapping [ErrUnsupported]; Queue's
//     methods pass it on.
//   - Optional, found by type assertion in driver.go alone:
//     [CompleteClaimer] (complete a batch and claim the next in one round
//     trip; without it the Worker calls Complete and Claim), [Waker]
//     (wake idle Workers on enqueue; without it they poll),
//     [HealthReporter] and [Checker] (database-specific health and
//     probes; without them Health says ErrUnsupported and Check runs the
//     common probes). They are optional because they are optimizations or
//     extras a database may lack, not parts of running jobs.
package queue
