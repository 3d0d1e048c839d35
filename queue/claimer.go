package queue

import (
	"context"
	"time"
)

// Claimer takes jobs from a queue table for one holder and ends or renews
// its claims. Every dialect provides one; the conformance suite in
// package integration checks each point below.
//
// A Claimer is safe for concurrent use. Its methods:
//
//   - Claim returns up to n ready jobs (run_at <= the database's now) of
//     queue, roughly in (priority, run_at, id) order, each held by this
//     claimer alone. It never waits on a row another claimer holds and never
//     returns a job another live claimer holds. n <= 0 gives
//     ErrInvalidLimit, a bad queue name ErrInvalidQueue, a missing table
//     ErrNotMigrated, a closed claimer ErrClosed. A cancelled ctx leaves no
//     lock and no claim behind.
//   - Complete deletes the jobs.
//   - Retry records a failure: attempt+1, last_error kept, run_at = now +
//     Delay; once attempt reaches max_attempts (or Dead is set) the job is
//     dead and kept for inspection.
//   - Release puts jobs back as they were, spending no attempt.
//   - Extend renews leases by the claimer's lease duration. For lock-based
//     claims, which last while the claimer's connection does, it checks
//     that connection instead, and reports every lease lost when it is
//     gone.
//
// Complete, Retry, Release and Extend match each job on its lease token.
// Leases that are no longer this holder's are reported in a
// *LeaseLostError (errors.Is ErrLeaseLost) and change nothing; the others
// in the batch take effect.
type Claimer interface {
	Claim(ctx context.Context, queue string, n int) ([]*Job, error)
	Complete(ctx context.Context, leases []Lease) error
	Retry(ctx context.Context, retries []RetryParams) error
	Release(ctx context.Context, leases []Lease) error
	Extend(ctx context.Context, leases []Lease) error
	// Close gives back every job still held and frees the claimer's
	// connection. Further calls return ErrClosed.
	Close(ctx context.Context) error
}

// Driver is what a dialect gives a [Queue]: storage for new jobs, claimers,
// and counts. Jobs reach a Driver validated and with defaults applied.
type Driver interface {
	// Dialect names the database, e.g. "postgres".
	Dialect() string
	// Enqueue inserts jobs atomically and returns their IDs in order. tx is
	// nil (the driver uses its own transaction) or a transaction of the
	// caller's whose type the dialect accepts; anything else gives
	// ErrUnsupportedTx. A dedupe-key collision gives ErrDuplicate.
	Enqueue(ctx context.Context, tx any, jobs []NewJob) ([]int64, error)
	// NewClaimer returns a Claimer with its own connection or session.
	NewClaimer(ctx context.Context) (Claimer, error)
	// Stats counts jobs per queue.
	Stats(ctx context.Context) ([]QueueStats, error)
	// Close releases what the driver opened itself; a pool or *sql.DB the
	// user passed in stays open.
	Close() error
}

// LeaseDuration is implemented by claimers whose claims are leases; the
// Worker renews each held job's lease every third of it.
type LeaseDuration interface {
	LeaseDuration() time.Duration
}

// LockCheck is implemented by claimers whose claims are locks that live in
// a connection (PostgreSQL advisory locks). While it holds jobs, the Worker
// calls Extend every LockCheckInterval, which checks the connection (and
// so keeps idle timeouts from ending it) and reports every lease lost when
// the connection is gone; the Worker then cancels those jobs' handlers. An
// Extend gets at most one interval, so a loss is noticed within two.
type LockCheck interface {
	LockCheckInterval() time.Duration
}

// CompleteClaimer is implemented by claimers that can complete a batch of
// jobs and claim the next batch in one round trip to the database. A Worker
// whose claimer has it sends the completions that are waiting when it
// claims along with the claim; without it, or with none waiting, it calls
// Complete and Claim as usual.
//
// CompleteClaim does what Complete(ctx, p.Complete) and then Claim(ctx,
// p.Queue, p.N) would, and reports each part's outcome as that call would
// have returned it. A claim part that fails leaves the completion done
// (or reports Complete's error for it), and a completion that fails does
// not stop the claim: the completion commits on its own before the claim
// (PostgreSQL), or with the claim's transaction and, whenever that does
// not commit, alone before CompleteClaim returns (MySQL, SQLite).
type CompleteClaimer interface {
	CompleteClaim(ctx context.Context, p CompleteClaimParams) CompleteClaimResult
}

// CompleteClaimParams is what one CompleteClaim does: complete the jobs
// of Complete, then claim up to N jobs of Queue.
type CompleteClaimParams struct {
	Complete []Lease
	Queue    string
	N        int
}

// CompleteClaimResult is the outcome of a CompleteClaim: CompleteErr is
// what Complete would have returned (nil, a *LeaseLostError naming the
// leases that were not this holder's, or the error that kept the jobs
// from being completed), and Jobs and ClaimErr what Claim would have.
type CompleteClaimResult struct {
	CompleteErr error
	Jobs        []*Job
	ClaimErr    error
}

// heartbeatInterval is how often a Worker calls c.Extend while it holds
// jobs: a third of a lease, or a lock claimer's check interval; 0 when c
// needs neither.
func heartbeatInterval(c Claimer) time.Duration {
	if lc, ok := c.(LockCheck); ok && lc.LockCheckInterval() > 0 {
		return lc.LockCheckInterval()
	}
	if ld, ok := c.(LeaseDuration); ok && ld.LeaseDuration() > 0 {
		return ld.LeaseDuration() / 3
	}
	return 0
}
