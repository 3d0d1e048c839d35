package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dbqueue/dbq/dialect"
)

// ErrUnsupported: the dialect driver does not implement an optional
// operation. Every dialect dbq ships implements them all.
var ErrUnsupported = errors.New("dbq: operation not supported by this dialect")

// KindStats counts one queue's stored jobs of one kind.
type KindStats struct {
	Queue     string `json:"queue"`
	Kind      string `json:"kind"`
	Ready     int64  `json:"ready"`
	Scheduled int64  `json:"scheduled"`
	Held      int64  `json:"held"`
	Dead      int64  `json:"dead"`
}

// JobFilter selects stored jobs for [Queue.Jobs].
type JobFilter struct {
	// Queue, when set, keeps only that queue's jobs.
	Queue string
	// State, when set, keeps only jobs in that state.
	State State
	// Kind, when set, keeps only jobs of that kind.
	Kind string
	// DedupeKey, when set, keeps only the job of Queue (required with it)
	// whose dedupe key it is: one probe of the unique index on queue and
	// key. The other filters apply to that job.
	DedupeKey string
	// AfterID keeps jobs with a larger id: pass the last id of a page to
	// get the next.
	AfterID int64
	// Limit caps the jobs returned: default 100, at most 10,000.
	Limit int
}

// Default and largest JobFilter.Limit.
const (
	DefaultListLimit = 100
	MaxListLimit     = 10_000
)

func (f JobFilter) check() (JobFilter, error) {
	if f.Queue != "" {
		if err := dialect.ValidateQueue(f.Queue); err != nil {
			return f, err
		}
	}
	if f.Kind != "" {
		if err := ValidateStoredKind(f.Kind); err != nil {
			return f, err
		}
	}
	switch f.State {
	case "", StateReady, StateClaimed, StateDead:
	default:
		return f, fmt.Errorf("%w: unknown state %q", ErrInvalidJob, f.State)
	}
	if f.DedupeKey != "" && f.Queue == "" {
		return f, fmt.Errorf("%w: a DedupeKey filter needs a Queue: keys are unique per queue", ErrInvalidJob)
	}
	if len(f.DedupeKey) > 200 {
		return f, fmt.Errorf("%w: DedupeKey longer than 200 bytes", ErrInvalidJob)
	}
	if f.Limit < 0 || f.Limit > MaxListLimit {
		return f, fmt.Errorf("%w: Limit %d out of range 0..%d", ErrInvalidLimit, f.Limit, MaxListLimit)
	}
	if f.Limit == 0 {
		f.Limit = DefaultListLimit
	}
	return f, nil
}

func (q *Queue) admin() (Admin, error) {
	if q.closed.Load() {
		return nil, ErrClosed
	}
	return q.drv, nil
}

// EnqueueUnique stores job unless a job of its queue with its DedupeKey is
// stored (ready, scheduled, held or dead), and returns the id of the new
// job or of the existing one, and whether it existed. It is how to make a
// job unique without handling ErrDuplicate. tx is the caller's
// transaction, as for EnqueueTx, or nil.
func (q *Queue) EnqueueUnique(ctx context.Context, tx any, job NewJob) (id int64, existed bool, err error) {
	a, err := q.admin()
	if err != nil {
		return 0, false, err
	}
	if job.DedupeKey == "" {
		return 0, false, fmt.Errorf("%w: EnqueueUnique needs a DedupeKey", ErrInvalidJob)
	}
	if err := q.check(&job); err != nil {
		return 0, false, err
	}
	return a.EnqueueUnique(ctx, tx, job)
}

// Jobs lists stored jobs that match f, in id order. Page with f.AfterID.
// A DedupeKey filter needs a driver that implements DedupeFinder
// (ErrUnsupported otherwise).
func (q *Queue) Jobs(ctx context.Context, f JobFilter) ([]*Job, error) {
	a, err := q.admin()
	if err != nil {
		return nil, err
	}
	if f, err = f.check(); err != nil {
		return nil, err
	}
	if f.DedupeKey != "" {
		return q.jobByDedupeKey(ctx, a, f)
	}
	return a.Jobs(ctx, f)
}

// jobByDedupeKey finds the job of f.Queue with key f.DedupeKey, then reads
// it as Jobs lists it (one primary-key probe, so its state is the one
// Jobs shows) and keeps it if it matches the rest of f. A job completed
// or replaced between the two reads is not returned.
func (q *Queue) jobByDedupeKey(ctx context.Context, a Admin, f JobFilter) ([]*Job, error) {
	id, ok, err := q.drv.FindDedupe(ctx, f.Queue, f.DedupeKey)
	if err != nil || !ok || id <= f.AfterID {
		return nil, err
	}
	jobs, err := a.Jobs(ctx, JobFilter{AfterID: id - 1, Limit: 1})
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	j := jobs[0]
	if j.ID != id || j.Queue != f.Queue || j.DedupeKey != f.DedupeKey ||
		f.State != "" && j.State != f.State || f.Kind != "" && j.Kind != f.Kind {
		return nil, nil
	}
	return []*Job{j}, nil
}

// CountEachQueue is CountQueues for a driver that counts one queue per
// statement: it calls count for each of names and returns the results of
// the queues that hold a job, with Queue set, in name order. A queue whose
// jobs all went between the listing of names and its count is left out.
// It stops at the first error.
func CountEachQueue(ctx context.Context, names []string,
	count func(ctx context.Context, queue string) (QueueStats, error)) ([]QueueStats, error) {
	out := make([]QueueStats, 0, len(names))
	for _, name := range names {
		s, err := count(ctx, name)
		if err != nil {
			return nil, err
		}
		if s.Ready+s.Scheduled+s.Held+s.Dead > 0 {
			s.Queue = name
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b QueueStats) int { return strings.Compare(a.Queue, b.Queue) })
	return out, nil
}

// CountQueues counts each queue's jobs as Stats does, each count stopping
// at limit (a count of limit means "limit or more"): with a driver that
// implements QueueCounter it costs about limit index entries per queue and
// state, not a pass over every stored job. Other drivers get Stats, with
// counts above limit cut to it.
func (q *Queue) CountQueues(ctx context.Context, limit int64) ([]QueueStats, error) {
	if q.closed.Load() {
		return nil, ErrClosed
	}
	if limit < 1 {
		return nil, fmt.Errorf("%w: CountQueues limit %d, want at least 1", ErrInvalidLimit, limit)
	}
	return q.drv.CountQueues(ctx, limit)
}

// StatsByKind counts stored jobs per queue and kind, ordered by queue then
// kind; jobs enqueued without a kind count under kind "".
func (q *Queue) StatsByKind(ctx context.Context) ([]KindStats, error) {
	a, err := q.admin()
	if err != nil {
		return nil, err
	}
	return a.StatsByKind(ctx)
}

// Cancel deletes the jobs of ids that no one holds and returns those it
// deleted; held jobs stay with their holder.
func (q *Queue) Cancel(ctx context.Context, ids ...int64) ([]int64, error) {
	a, err := q.admin()
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	return a.Cancel(ctx, ids)
}

// RetryDead makes dead jobs of queue ready now with attempt 0; no ids
// means all of the queue's dead jobs. It returns the ids it revived.
func (q *Queue) RetryDead(ctx context.Context, queue string, ids ...int64) ([]int64, error) {
	a, err := q.admin()
	if err != nil {
		return nil, err
	}
	if err := dialect.ValidateQueue(queue); err != nil {
		return nil, err
	}
	return a.RetryDead(ctx, queue, ids)
}

// Pause stops claims from queue until Resume; jobs held go on.
func (q *Queue) Pause(ctx context.Context, queue string) error { return q.setPaused(ctx, queue, true) }

// Resume lets claims take jobs of a paused queue again.
func (q *Queue) Resume(ctx context.Context, queue string) error {
	return q.setPaused(ctx, queue, false)
}

func (q *Queue) setPaused(ctx context.Context, queue string, paused bool) error {
	a, err := q.admin()
	if err != nil {
		return err
	}
	if err := dialect.ValidateQueue(queue); err != nil {
		return err
	}
	return a.SetPaused(ctx, queue, paused)
}

// Paused lists the paused queues in name order.
func (q *Queue) Paused(ctx context.Context) ([]string, error) {
	a, err := q.admin()
	if err != nil {
		return nil, err
	}
	return a.Paused(ctx)
}

// Snooze returns an error a Handler gives to run its job again after d
// without spending an attempt: the claim ends, the job is ready again at
// now + d on the database clock, and its attempt and last_error stay.
func Snooze(d time.Duration) error { return &SnoozeError{Delay: max(d, 0)} }

// SnoozeError is what Snooze returns.
type SnoozeError struct{ Delay time.Duration }

func (e *SnoozeError) Error() string { return fmt.Sprintf("dbq: job snoozed for %v", e.Delay) }
