package queue

// A Worker's second stage: running handlers, one goroutine a job, and the
// jobs in flight. See docs/lifecycle.md.

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// result is one run's end, on its way to the result writer. Its out is
// what the run asks for: OutcomeCompleted, OutcomeRetried (the handler
// failed; the write decides retry or dead, see dead), OutcomeSnoozed,
// OutcomeReleased or OutcomeLeaseLost. The Outcome reported to Hooks may
// differ: a write finds the lease lost, or cannot be made (tally).
type result struct {
	job   *Job
	out   Outcome
	err   error // the handler's
	perm  bool
	delay time.Duration
	// written is set on a done result whose completion a claim already
	// wrote (CompleteClaimer): the result writer only accounts for it.
	written bool
	// For Hooks only: the context JobStart returned and the run time.
	ctx  context.Context
	took time.Duration
}

// dead reports whether a failed result makes its job dead, as the dialects'
// retry statements decide it.
func (r *result) dead() bool { return r.perm || r.job.Attempt+1 >= r.job.MaxAttempts }

type running struct {
	job    *Job
	cancel context.CancelCauseFunc
	// returned is set once the handler has returned: a claim lost after
	// that is the result write's to report (its Complete or Retry finds
	// it lost), and a heartbeat that raced with the write (it read the
	// lease before the write ended the claim) reports nothing.
	returned atomic.Bool
}

// start runs j's handler on a slot of its own and hands its result to the
// writer.
func (r *runState) start(j *Job) {
	jctx, cancel := context.WithCancelCause(r.hardCtx)
	run := r.inflight.add(j, cancel)
	r.handlers.Add(1)
	go func() {
		defer r.handlers.Done()
		res := r.w.run(jctx, j)
		run.returned.Store(true)
		cancel(nil)
		if res.out != OutcomeCompleted || !r.pending.put(res) {
			r.results <- res
		}
		r.slots <- struct{}{}
	}()
}

// inflight holds the jobs claimed and not yet done with: running, or run and
// waiting for their result to be written. The heartbeat renews the claims
// of all of them, so a result whose write is slow or retried is still this
// worker's when it lands.
type inflight struct {
	mu sync.Mutex
	m  map[int64]*running
}

// add records j as running under cancel. A job claimed again while an
// earlier run of it is in flight lost that earlier claim (its lease ran
// out, or its lock's connection ended) before the heartbeat said so: that
// run is cancelled.
func (f *inflight) add(j *Job, cancel context.CancelCauseFunc) *running {
	r := &running{job: j, cancel: cancel}
	f.mu.Lock()
	defer f.mu.Unlock()
	if old := f.m[j.ID]; old != nil {
		old.cancel(errLeaseLostCause)
	}
	f.m[j.ID] = r
	return r
}

// empty says whether no job is in flight: every job claimed has had its
// result written (or its claim found lost).
func (f *inflight) empty() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m) == 0
}

// forget drops jobs whose results were written.
func (f *inflight) forget(jobs []*Job) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range jobs {
		if r := f.m[j.ID]; r != nil && r.job == j {
			delete(f.m, j.ID)
		}
	}
}

// leases returns the claims to renew.
func (f *inflight) leases() []Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	ls := make([]Lease, 0, len(f.m))
	for _, r := range f.m {
		ls = append(ls, r.job.Lease())
	}
	return ls
}

// lost cancels, with a lease-lost cause, the handlers still running under
// the lost leases, and returns their ids. A lease is matched on its token
// as well as its id: a heartbeat that read an earlier claim's lease must
// not cancel the run of a later claim of the same job.
func (f *inflight) lost(leases []Lease) []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var running []int64
	for _, l := range leases {
		if r := f.m[l.ID]; r != nil && r.job.Token == l.Token && !r.returned.Load() {
			r.cancel(errLeaseLostCause)
			running = append(running, l.ID)
		}
	}
	return running
}

// run calls the handler, recovering a panic as a failure. ctx's cause
// tells a lost lease and a hard stop from the handler's own errors.
func (w *Worker) run(ctx context.Context, j *Job) (res result) {
	res.job = j
	hctx := ctx
	var began time.Time
	if w.hooks != nil {
		res.ctx, began = ctx, time.Now()
	}
	defer func() {
		if p := recover(); p != nil {
			w.stats.panics.Add(1)
			res.out = OutcomeRetried
			res.err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			res.delay = w.cfg.Backoff(j.Attempt)
		}
		if w.hooks != nil {
			res.took = time.Since(began)
		}
	}()
	if w.hooks != nil {
		hctx = w.hooks.JobStart(ctx, j)
		res.ctx = hctx
	}
	err := w.handler(hctx, j)
	res.err = err
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errLeaseLostCause):
		res.out = OutcomeLeaseLost
	case err != nil && isSnooze(err, &res.delay):
		// Before the shutdown case: a handler that asked to run later
		// said what it wants, and a snooze costs no attempt either.
		res.out = OutcomeSnoozed
	case err != nil && errors.Is(cause, errShutdown):
		res.out = OutcomeReleased
	case err != nil:
		res.out = OutcomeRetried
		var p *permanentError
		res.perm = errors.As(err, &p)
		res.delay = w.cfg.Backoff(j.Attempt)
	default:
		res.out = OutcomeCompleted
	}
	return res
}

// isSnooze reports whether err is a Snooze, and sets *delay to its delay.
func isSnooze(err error, delay *time.Duration) bool {
	var s *SnoozeError
	if !errors.As(err, &s) {
		return false
	}
	*delay = s.Delay
	return true
}
