package queue

// A Worker's first stage: the claim loop, which claims jobs whenever
// handler slots are free (with the completions waiting to go with a
// claim) and waits between claims. See docs/lifecycle.md.

import (
	"context"
	"errors"
	"sync"
	"time"
)

// claimLoop claims whenever handler slots are free until ctx ends (nil),
// a claim finds the queue drained under ExitWhenEmpty (nil), or a claim
// fails in a way retrying cannot mend (that error).
func (r *runState) claimLoop(ctx context.Context, wake <-chan struct{}) error {
	w := r.w
	claimSlot := w.q.claimSlot(w.cfg.Queue)
	backoff := time.Duration(0)
	// Completions wait for a claim only while the loop is about to claim;
	// before it waits for anything else they go to the result writer.
	defer func() { r.handOver(handoff{results: r.pending.close()}) }()
	for {
		r.pending.open()
		// Wait for a free slot, then for this queue's turn to claim
		// (Config.ClaimConcurrency); slots freed meanwhile join the batch.
		select {
		case <-ctx.Done():
			return nil
		case <-r.slots:
		}
		if claimSlot != nil {
			select {
			case <-ctx.Done():
				return nil
			case claimSlot <- struct{}{}:
			}
		}
		free := r.gather(1)
		jobs, wrote, err := r.claim(ctx, free)
		if len(jobs) > free {
			jobs = r.giveBack(ctx, jobs, free)
		}
		if claimSlot != nil {
			<-claimSlot
		}
		for range free - len(jobs) {
			r.slots <- struct{}{}
		}
		if err != nil {
			r.handOver(wrote)
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrClosed) || errors.Is(err, ErrNotMigrated) || errors.Is(err, ErrUnsupportedServer):
			return err
		case err != nil:
			w.stats.claimErrors.Add(1)
			r.handOver(handoff{results: r.pending.close()})
			backoff = min(max(2*backoff, 100*time.Millisecond), 30*time.Second)
			w.log.Warn("dbq: claim failed; retrying", "err", err, "in", backoff)
			if !sleep(ctx, Jitter(backoff, 0.5)) {
				return nil
			}
			continue
		}
		backoff = 0
		w.stats.claimed.Add(int64(len(jobs)))
		for _, j := range jobs {
			r.start(j)
		}
		// After the jobs are in flight, whose claims the heartbeat then
		// renews: the result writer may keep this waiting.
		r.handOver(wrote)
		// Drained: nothing due, and every job claimed has its result
		// written (results handed over just now are still in flight).
		if len(jobs) == 0 && w.cfg.ExitWhenEmpty && r.inflight.empty() {
			return nil
		}
		// A full batch suggests more are ready: claim again at once.
		if len(jobs) < free {
			r.handOver(handoff{results: r.pending.close()})
			if !w.idle(ctx, Jitter(w.cfg.PollInterval, 0.2), &wake) {
				return nil
			}
		}
	}
}

// giveBack keeps the first n of jobs, which a claim of n returned more
// than n of, and releases the rest: a claimer that breaks the Claimer
// contract so must not start more handlers than the Worker has slots
// (the slot count would overflow and the claim loop stop for good).
func (r *runState) giveBack(ctx context.Context, jobs []*Job, n int) []*Job {
	extra := jobs[n:]
	r.w.log.Error("dbq: the claimer returned more jobs than it was asked for; giving the rest back",
		"queue", r.w.cfg.Queue, "asked", n, "got", len(jobs))
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	defer cancel()
	if err := r.claimer.Release(rctx, Leases(extra)); err != nil {
		r.w.log.Warn("dbq: giving back jobs failed; they return when their claims expire", "jobs", len(extra), "err", err)
	}
	return jobs[:n]
}

// defaultGatherWait is how long a claim that would take fewer than half a batch
// waits for more handler slots to free. Busy handlers free their slots one
// by one; claiming for each as it comes made claims of a few jobs, each
// costing the round trips and the commit of a full one (MySQL drains
// claimed 57 jobs a claim on average with BatchSize 100, 92 with the
// wait). A job waits at most this much longer to be claimed, and only
// while the Worker is busy.
const defaultGatherWait = time.Millisecond

// gather adds the handler slots free now to free, up to a batch, and when
// they make less than half a batch, those freed within r.gatherWait.
func (r *runState) gather(free int) int {
	batch := r.w.cfg.BatchSize
	for free < batch {
		select {
		case <-r.slots:
			free++
			continue
		default:
		}
		break
	}
	if free >= batch/2 {
		return free
	}
	t := time.NewTimer(r.gatherWait)
	defer t.Stop()
	for free < batch {
		select {
		case <-r.slots:
			free++
		case <-t.C:
			return free
		}
	}
	return free
}

// claim runs one claim of up to n jobs. Shutdown cuts it short (one
// waiting for a pool connection would otherwise hold Run up): the contract
// says a cancelled claim leaves no lock and no claim behind, and a lock
// claimer keeps the locks of the jobs still running.
//
// With a CompleteClaimer, the completions waiting in pending go with the
// claim; their results are returned for the result writer (handOver),
// marked written unless their write failed (it then writes them as any
// other).
func (r *runState) claim(ctx context.Context, n int) ([]*Job, handoff, error) {
	w := r.w
	cctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	var began time.Time
	if w.hooks != nil {
		began = time.Now()
	}
	var (
		jobs  []*Job
		err   error
		wrote handoff
	)
	if done := r.pending.take(); len(done) > 0 {
		leases := make([]Lease, len(done))
		for i := range done {
			leases[i] = done[i].job.Lease()
		}
		cc, _ := completeClaimer(r.claimer) // pending is nil unless it is one
		res := cc.CompleteClaim(cctx, CompleteClaimParams{Complete: leases, Queue: w.cfg.Queue, N: n})
		jobs, err = res.Jobs, res.ClaimErr
		wrote.results = done
		var lost *LeaseLostError
		switch {
		case res.CompleteErr == nil:
			wrote.written = true
		case errors.As(res.CompleteErr, &lost):
			wrote.written, wrote.lost = true, lost.IDs
		default:
			w.log.Debug("dbq: completing with a claim failed; writing the completions alone", "jobs", len(done), "err", res.CompleteErr)
		}
	} else {
		jobs, err = r.claimer.Claim(cctx, w.cfg.Queue, n)
	}
	// A claim cut short by shutdown is neither a claim nor a failure.
	if w.hooks != nil && (err == nil || ctx.Err() == nil) {
		w.hooks.ClaimDone(w.cfg.Queue, n, len(jobs), time.Since(began), err)
	}
	return jobs, wrote, err
}

// handOver gives results taken from pending to the result writer. It
// waits for the writer, as a handler does.
func (r *runState) handOver(h handoff) {
	if len(h.results) == 0 {
		return
	}
	for i := range h.results {
		h.results[i].written = h.written
	}
	r.handoffs <- h
}

// handoff is results taken from pending, for the result writer: written
// when a claim wrote their completions, with the ids among them whose
// leases it found lost.
type handoff struct {
	results []result
	written bool
	lost    []int64
}

// pending holds completed runs while the claim loop is about to claim, for
// that claim to write (CompleteClaimer). A nil *pending is never open.
type pending struct {
	mu      sync.Mutex
	isOpen  bool
	results []result
}

// open lets completed runs wait for the next claim.
func (p *pending) open() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.isOpen = true
	p.mu.Unlock()
}

// put keeps res for the next claim and reports true, or reports false
// when no claim is coming soon: then res goes to the result writer.
func (p *pending) put(res result) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.isOpen {
		return false
	}
	p.results = append(p.results, res)
	return true
}

// take returns the runs waiting for a claim; more may join for the next.
func (p *pending) take() []result {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.results
	p.results = nil
	return out
}

// close stops runs from waiting for a claim and returns those waiting.
func (p *pending) close() []result {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isOpen = false
	out := p.results
	p.results = nil
	return out
}

// idle waits d, or less when *wake fires, and reports false when ctx ends
// first. A closed wake channel means the driver can no longer wake us (its
// listener died): from then on the worker only polls.
func (w *Worker) idle(ctx context.Context, d time.Duration, wake *<-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case _, ok := <-*wake:
			if ok {
				return true
			}
			w.log.Warn("dbq: wake-ups stopped; polling only")
			*wake = nil
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
