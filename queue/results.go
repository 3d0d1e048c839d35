package queue

// A Worker's third stage: writing results (complete, retry, snooze,
// release) in batches, and counting and reporting each. See
// docs/lifecycle.md.

import (
	"context"
	"errors"
	"time"
)

// writeResults writes results in batches: whatever has arrived by the
// time the previous batch is written goes in the next one. It counts each
// result once its fate is known and reports it to the hooks, then hands
// the batch's jobs to forget.
//
// Results a claim took (handoffs) are accounted for the same way; those
// whose completion the claim wrote are not written again.
func (w *Worker) writeResults(ctx context.Context, c Claimer, results <-chan result, handoffs <-chan handoff, forget func([]*Job)) {
	b := &resultBatch{w: w, c: c}
	if w.cfg.Activity != nil {
		b.act = &workerActivity{a: w.cfg.Activity, queue: w.cfg.Queue, kinds: map[string]*activityCounts{}}
	}
	for b.receive(results, handoffs) {
		b.write(ctx)
		for i := range b.results {
			b.jobs = append(b.jobs, b.results[i].job)
		}
		forget(b.jobs)
		b.report()
	}
}

// resultBatch is one batch of results on its way to the database, with
// the lists it writes and what became of each write; its slices are kept
// from batch to batch.
type resultBatch struct {
	w   *Worker
	c   Claimer
	act *workerActivity // nil without Config.Activity

	results   []result
	jobs      []*Job // the batch's, to hand to forget
	completes []Lease
	retries   []RetryParams
	snoozes   []RetryParams
	releases  []Lease
	giveBack  []Lease

	lostIDs   map[int64]struct{}      // leases a write or the claim found lost
	unwritten [OutcomeUnrecorded]bool // by result.out: that write failed
}

// maxResultBatch caps the results one batch writes.
const maxResultBatch = 500

// receive waits for the next result or handoff and takes whatever else
// has arrived, up to maxResultBatch. It reports false once results is
// closed and nothing is left.
func (b *resultBatch) receive(results <-chan result, handoffs <-chan handoff) bool {
	b.results, b.jobs = b.results[:0], b.jobs[:0]
	b.lostIDs, b.unwritten = nil, [OutcomeUnrecorded]bool{}
	select {
	case first, ok := <-results:
		if !ok {
			return false
		}
		b.results = append(b.results, first)
	case h := <-handoffs:
		b.results = append(b.results, h.results...)
		if len(h.lost) > 0 {
			b.w.leasesLost("complete", h.lost)
			b.addLost(h.lost)
		}
	}
	for len(b.results) < maxResultBatch {
		select {
		case r, ok := <-results:
			if !ok {
				return true
			}
			b.results = append(b.results, r)
		default:
			return true
		}
	}
	return true
}

func (b *resultBatch) addLost(ids []int64) {
	for _, id := range ids {
		if b.lostIDs == nil {
			b.lostIDs = make(map[int64]struct{}, len(ids))
		}
		b.lostIDs[id] = struct{}{}
	}
}

// write sorts the batch by what each run asks for and writes each kind in
// one statement.
func (b *resultBatch) write(ctx context.Context) {
	b.completes, b.retries, b.snoozes, b.releases, b.giveBack = b.completes[:0], b.retries[:0], b.snoozes[:0], b.releases[:0], b.giveBack[:0]
	for i := range b.results {
		r := &b.results[i]
		switch r.out {
		case OutcomeCompleted:
			if !r.written {
				b.completes = append(b.completes, r.job.Lease())
			}
		case OutcomeRetried:
			b.retries = append(b.retries, RetryParams{Lease: r.job.Lease(), Delay: r.delay, Error: r.err.Error(), Dead: r.perm})
		case OutcomeSnoozed:
			b.snoozes = append(b.snoozes, RetryParams{Lease: r.job.Lease(), Delay: r.delay, Snooze: true})
		case OutcomeReleased:
			b.releases = append(b.releases, r.job.Lease())
		case OutcomeLeaseLost:
			b.giveBack = append(b.giveBack, r.job.Lease())
		}
	}
	c := b.c
	// A run ended because its claim was reported lost: give the claim
	// back in case it is still held after all (a Release of a lost lease
	// changes nothing), so that no job stays held by a claimer whose
	// worker has let it go.
	if len(b.giveBack) > 0 {
		gctx, cancel := context.WithTimeout(ctx, writeTimeout)
		_ = c.Release(gctx, b.giveBack)
		cancel()
	}
	b.writeOne(ctx, OutcomeCompleted, "complete", len(b.completes), func(ctx context.Context) error { return c.Complete(ctx, b.completes) })
	b.writeOne(ctx, OutcomeRetried, "retry", len(b.retries), func(ctx context.Context) error { return c.Retry(ctx, b.retries) })
	b.writeOne(ctx, OutcomeSnoozed, "snooze", len(b.snoozes), func(ctx context.Context) error { return c.Retry(ctx, b.snoozes) })
	b.writeOne(ctx, OutcomeReleased, "release", len(b.releases), func(ctx context.Context) error { return c.Release(ctx, b.releases) })
}

// writeOne writes the n results that ask for out with fn, noting the
// leases it finds lost or that it failed.
func (b *resultBatch) writeOne(ctx context.Context, out Outcome, what string, n int, fn func(context.Context) error) {
	if n == 0 {
		return
	}
	lost, err := b.w.write(ctx, what, fn, n)
	b.unwritten[out] = err != nil
	b.addLost(lost)
}

// report counts each result of the written batch and tells the hooks and
// the activity table.
func (b *resultBatch) report() {
	w := b.w
	for i := range b.results {
		r := &b.results[i]
		_, wasLost := b.lostIDs[r.job.ID]
		o := w.tally(r, wasLost, b.unwritten[r.out] && !r.written)
		if b.act != nil {
			b.act.count(r.job.Kind, o)
		}
		if w.hooks != nil {
			w.hooks.JobEnd(r.ctx, r.job, o, r.took, r.err)
		}
		b.results[i] = result{} // let the job be collected
	}
	clear(b.jobs)
}

// tally counts one result whose write went as told and returns the
// Outcome to report.
func (w *Worker) tally(r *result, wasLost, unwritten bool) Outcome {
	switch {
	case r.out == OutcomeLeaseLost || wasLost:
		w.stats.lost.Add(1)
		return OutcomeLeaseLost
	case unwritten:
		return OutcomeUnrecorded
	}
	switch r.out {
	case OutcomeCompleted:
		w.stats.completed.Add(1)
		return OutcomeCompleted
	case OutcomeRetried:
		w.stats.retried.Add(1)
		if r.dead() {
			w.stats.dead.Add(1)
			return OutcomeDead
		}
		return OutcomeRetried
	case OutcomeSnoozed:
		w.stats.snoozed.Add(1)
		return OutcomeSnoozed
	default:
		w.stats.released.Add(1)
		return OutcomeReleased
	}
}

// write runs one batch write of n jobs, retrying transient failures for
// up to writeRetryFor (long enough to ride out a database restart, while
// the heartbeat keeps the jobs' leases), and returns the ids whose leases
// were lost, or the error that kept the batch from being written. Such a
// batch is logged; its jobs come back when their claims end (lease expiry
// or the claimer's connection closing), so they run again rather than
// being lost.
func (w *Worker) write(ctx context.Context, what string, fn func(context.Context) error, n int) (lostIDs []int64, err error) {
	deadline := time.Now().Add(writeRetryFor)
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, writeTimeout)
		err = fn(actx)
		cancel()
		if err == nil {
			return nil, nil
		}
		var lost *LeaseLostError
		if errors.As(err, &lost) {
			w.leasesLost(what, lost.IDs)
			return lost.IDs, nil
		}
		if errors.Is(err, ErrClosed) || errors.Is(err, ErrNotMigrated) || errors.Is(err, ErrUnsupportedServer) ||
			time.Now().After(deadline) ||
			!sleep(ctx, Jitter(min(time.Duration(50<<min(attempt, 10))*time.Millisecond, time.Second), 0.5)) {
			break
		}
	}
	w.log.Error("dbq: could not record results; the jobs will run again", "op", what, "jobs", n, "err", err)
	return nil, err
}

// leasesLost reports the ids whose leases a write (op) found lost.
func (w *Worker) leasesLost(op string, ids []int64) {
	w.log.Warn("dbq: leases lost", "op", op, "ids", ids)
	if w.hooks != nil {
		w.hooks.LeasesLost(w.cfg.Queue, ids)
	}
}
