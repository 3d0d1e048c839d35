package queue

import (
	"context"
	"time"
)

// This file is the driver contract: what a dialect gives a Queue. A
// dialect implements [Driver] and [Claimer] — every method of both, which
// every shipped dialect has — and may implement the optional interfaces
// below them ([CompleteClaimer], [Waker], [HealthReporter], [Checker]),
// which the Worker and Queue find by type assertion, here and nowhere
// else. A third-party driver that cannot do something a required method
// asks (move jobs, keep activity, store schedules) returns an error
// wrapping [ErrUnsupported] from it; the Queue method that called it
// passes the error on, and dbq's commands say the database cannot do it.

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
//   - Heartbeat is how often a Worker calls Extend while it holds jobs of
//     this claimer: a third of the lease for leases, so a lease gets two
//     more tries after a missed renewal; for locks that live in a
//     connection (PostgreSQL advisory), how often that connection is
//     checked, which also keeps idle timeouts from ending it. An Extend
//     gets at most one Heartbeat, so a lost lock is noticed within two. 0:
//     the claims need no renewal.
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
	Heartbeat() time.Duration
	// Close gives back every job still held and frees the claimer's
	// connection. Further calls return ErrClosed.
	Close(ctx context.Context) error
}

// Driver is what a dialect gives a [Queue]: storage for new jobs,
// claimers and counts, the admin methods ([Admin], [QueueCounter],
// [DedupeFinder]), schedules ([ScheduleStore]), worker activity
// ([ActivityStore]), moving jobs between databases ([Mover]) and rescuing
// expired claims. Jobs reach a Driver validated and with defaults applied.
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
	// Rescue gives back every job whose claim has expired (its holder
	// died or stalled without Extend), in every queue, and returns how
	// many. Each counts as a failed run: attempt+1, and dead when its
	// attempts are spent. Lease-based claimers also rescue as they claim;
	// calling it makes such jobs claimable sooner. Where claims are locks
	// that end with their connection (PostgreSQL advisory) there is
	// nothing to rescue and it returns 0.
	Rescue(ctx context.Context) (int, error)
	// Close releases what the driver opened itself; a pool or *sql.DB the
	// user passed in stays open.
	Close() error

	Admin
	QueueCounter
	DedupeFinder
	ScheduleStore
	ActivityStore
	Mover
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

// The optional interfaces, asserted here and nowhere else.

// completeClaimer returns c's CompleteClaimer, if it is one.
func completeClaimer(c Claimer) (CompleteClaimer, bool) {
	cc, ok := c.(CompleteClaimer)
	return cc, ok
}

// waker returns d's Waker, if it is one.
func waker(d Driver) (Waker, bool) {
	w, ok := d.(Waker)
	return w, ok
}

// healthReporter returns d's HealthReporter, if it is one.
func healthReporter(d Driver) (HealthReporter, bool) {
	r, ok := d.(HealthReporter)
	return r, ok
}

// checker returns d's Checker, if it is one.
func checker(d Driver) (Checker, bool) {
	c, ok := d.(Checker)
	return c, ok
}

// Admin is implemented by drivers whose jobs can be managed outside a
// claim: unique enqueue that returns the existing job, listing, cancel,
// reviving dead jobs and pausing queues. Every shipped dialect implements
// it; Queue's methods of the same names return ErrUnsupported otherwise.
type Admin interface {
	// EnqueueUnique stores job, whose DedupeKey is set, unless a stored job
	// of its queue has that key; it returns the id of the job it stored or
	// of the one already there, and whether that one existed. It never
	// fails with ErrDuplicate and never aborts the caller's transaction tx
	// (nil: the driver's own).
	EnqueueUnique(ctx context.Context, tx any, job NewJob) (id int64, existed bool, err error)
	// Jobs lists stored jobs that match f in id order, at most f.Limit.
	Jobs(ctx context.Context, f JobFilter) ([]*Job, error)
	// Cancel deletes those of ids that no one holds (ready, scheduled or
	// dead) and returns the ids it deleted. A held job is left to its
	// holder, who may still complete or fail it.
	Cancel(ctx context.Context, ids []int64) ([]int64, error)
	// RetryDead makes dead jobs of queue ready to run now, with attempt 0
	// and last_error kept; ids nil means every dead job of the queue. It
	// returns the ids it revived.
	RetryDead(ctx context.Context, queue string, ids []int64) ([]int64, error)
	// SetPaused pauses or resumes queue. While a queue is paused, Claim
	// returns none of its jobs; enqueue, complete, retry and release go on.
	SetPaused(ctx context.Context, queue string, paused bool) error
	// Paused lists the paused queues in name order.
	Paused(ctx context.Context) ([]string, error)
	// StatsByKind counts stored jobs per queue and kind, ordered by queue
	// then kind; jobs with no kind count under kind "".
	StatsByKind(ctx context.Context) ([]KindStats, error)
}

// DedupeFinder is implemented by drivers that find a stored job by its
// queue and dedupe key with one probe of their unique index on the two.
// [Queue.Jobs] uses it for JobFilter.DedupeKey. Every shipped dialect
// implements it.
type DedupeFinder interface {
	// FindDedupe returns the id of queue's stored job with dedupe key key;
	// ok is false when there is none.
	FindDedupe(ctx context.Context, queue, key string) (id int64, ok bool, err error)
}

// QueueCounter is implemented by drivers that count each queue's jobs as
// Stats does, but stop counting a state of a queue at a limit, so that a
// count reads at most about that many index entries however many jobs are
// stored. [Queue.CountQueues] uses it and falls back to Stats.
type QueueCounter interface {
	// CountQueues returns what Stats returns, each of Ready, Scheduled,
	// Held and Dead at most limit (limit means "limit or more"), for the
	// queues with stored jobs, in name order. OldestReadyAge is exact.
	CountQueues(ctx context.Context, limit int64) ([]QueueStats, error)
}

// Waker is implemented by drivers that can tell idle workers at once that
// jobs were enqueued, such as PostgreSQL with LISTEN/NOTIFY. Workers still
// poll; a wake-up only cuts the wait short.
type Waker interface {
	// Subscribe returns a channel that receives (coalesced, never blocking
	// the sender) after jobs of queue are committed, and a function that
	// ends the subscription.
	Subscribe(queue string) (wake <-chan struct{}, stop func())
}

// ScheduleStore is implemented by drivers that keep recurring schedules in
// the schedules table (migration 00004) beside the jobs table. Package
// schedule runs schedules on it; every shipped dialect implements it, and
// Queue's schedule methods return ErrUnsupported otherwise.
//
// The one promise that matters is AdvanceSchedule's: whatever the number
// of processes that call it for the same tick, at once or later, exactly
// one of them gets Advanced and enqueues the tick's job.
type ScheduleStore interface {
	// UpsertSchedule stores def, or updates the stored schedule of its name:
	// spec, time zone, queue and next tick, and def.At as its seen_at. Its
	// spec_since becomes def.At when the row is new or its spec or time zone
	// differ from def's, and stays as it is otherwise. The last tick and the
	// paused flag of a stored schedule stay as they are.
	UpsertSchedule(ctx context.Context, def ScheduleDef) error
	// AdvanceSchedule records tick t.At as the schedule's last tick — only
	// if the stored last tick is older (or none) — and, in the same
	// transaction and only then, enqueues t.Job unless the schedule is
	// paused. The job's DedupeKey is set and guards the tick a second time:
	// a job of the queue that holds it is left alone and reported in
	// TickResult.Existed. A tick of a schedule that is not stored is not
	// Advanced: callers upsert first.
	AdvanceSchedule(ctx context.Context, t Tick) (TickResult, error)
	// Schedules lists the stored schedules in name order.
	Schedules(ctx context.Context) ([]ScheduleInfo, error)
	// SetSchedulePaused pauses or resumes a stored schedule; one that is
	// not stored gives ErrScheduleNotFound.
	SetSchedulePaused(ctx context.Context, name string, paused bool) error
	// DeleteSchedule removes a stored schedule. When seenBefore is not the
	// zero time it removes it only if its seen_at is unknown or before
	// seenBefore, in the same statement, so that a scheduler refreshing the
	// row meanwhile keeps it. Nothing removed gives ErrScheduleNotFound.
	DeleteSchedule(ctx context.Context, name string, seenBefore time.Time) error
}

// ActivityStore is implemented by drivers that keep worker activity in the
// activity and processes tables (migration 00006): how many jobs each
// worker process completed, retried and made dead per queue, kind and
// minute, and which processes run Workers now. [Activity] writes it;
// dashboards read it. Every shipped dialect implements it; Queue's
// activity methods return ErrUnsupported otherwise.
//
// A process writes only its own rows (keyed by its process id), so no row
// is shared between processes and no write waits on another's. Times are
// the writing process's clock, in UTC; minutes are truncated.
type ActivityStore interface {
	// AddActivity adds each count to its row (process, queue, kind,
	// minute), inserting the row when it is missing: one statement for
	// the batch, of at most MaxActivityBatch counts.
	AddActivity(ctx context.Context, counts []ActivityCount) error
	// Activity sums the counts of every process and kind per queue and
	// minute, for minutes at or after since, in (queue, minute) order.
	// Process and Kind are "" in what it returns.
	Activity(ctx context.Context, since time.Time) ([]ActivityCount, error)
	// TouchProcess stores p, or updates its queues, concurrency and
	// SeenAt: the process's heartbeat.
	TouchProcess(ctx context.Context, p ProcessInfo) error
	// RemoveProcess deletes the process of that id; none is no error.
	RemoveProcess(ctx context.Context, id string) error
	// Processes lists the stored processes, most recently started first.
	Processes(ctx context.Context) ([]ProcessInfo, error)
	// PruneActivity deletes at most p.Limit activity rows of minutes
	// before p.Before, and every process last seen before
	// p.ProcessesSeenBefore; it returns the activity rows deleted.
	PruneActivity(ctx context.Context, p ActivityPrune) (int64, error)
}

// Mover is implemented by drivers whose jobs package move can take out of
// one database and put into another. Every dialect's jobs table has the
// same columns, so a job moves whole: queue, kind, payload bytes, priority,
// run_at, attempt, max_attempts, last_error, dedupe_key, created_at and
// state (ready or dead).
type Mover interface {
	// Identity names the database and table the driver stores jobs in,
	// without credentials, e.g. "postgres://10.0.0.5:5432/app/public.dbq_jobs".
	// Two drivers over the same table give the same identity.
	Identity(ctx context.Context) (string, error)
	// Survey measures the largest payload and dedupe key among the stored
	// jobs that f selects, ignoring AfterID and Limit.
	Survey(ctx context.Context, f ExportFilter) (Survey, error)
	// Export starts a batch: up to f.Limit stored jobs that f selects and
	// that no one holds, in id order after f.AfterID, each locked so that
	// claims (and other exports) skip it until the batch ends. It returns
	// a batch with no jobs when there are none.
	Export(ctx context.Context, f ExportFilter) (ExportBatch, error)
	// Import stores jobs as they are, in one transaction: each keeps its
	// kind, state, attempt, max_attempts, last_error, run_at, priority, payload,
	// dedupe key and created_at, and gets a new id. Every job must have a
	// DedupeKey. A job whose queue already stores a job with its key is not
	// stored again. It returns, in order, each job as stored (the new one or
	// the one already there) and whether it is new.
	Import(ctx context.Context, jobs []*Job) ([]Imported, error)
	// Limits gives the largest payload and dedupe key, in bytes, the table
	// can store.
	Limits(ctx context.Context) (MoveLimits, error)
	// Stored reads, outside any batch, the stored jobs (held ones too, in
	// state claimed where the dialect marks them) that have the queue and
	// dedupe key of one of keys, in no particular order; a key no job has
	// is left out. Package move reads every job it moved back with it to
	// verify the destination.
	Stored(ctx context.Context, keys []JobKey) ([]*Job, error)
}

// HealthReporter is implemented by drivers that can tell what holds their
// database's MVCC horizon back and how many dead rows the jobs table
// carries (PostgreSQL). [Queue.Health] returns ErrUnsupported for the
// others.
type HealthReporter interface {
	Health(ctx context.Context) (Health, error)
}

// Checker is implemented by drivers with probes of their own for [Check]:
// that the database keeps the promises the claim rests on (a row one
// session locks is skipped by another's claim; a session stays the
// claimer's own). Each result names its probe.
type Checker interface {
	Check(ctx context.Context) []CheckResult
}
