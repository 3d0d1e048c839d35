package queue_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq/internal/memq"
	"github.com/dbqueue/dbq/queue"
)

// pipeClaimer makes a claimer a queue.CompleteClaimer the plain way:
// Complete, then Claim. It counts every completion written, by either
// path, and can make either part of a CompleteClaim fail.
type pipeClaimer struct {
	queue.Claimer
	store *memq.Store

	calls, pipelined atomic.Int64
	// Every failEvery-th CompleteClaim fails its claim part after the
	// completions committed (failClaim), or fails its completion part
	// without writing anything (failComplete).
	failEvery                int64
	failClaim, failComplete  bool
	stealOnce                atomic.Bool // steal one lease before the first CompleteClaim writes it
	stolen                   atomic.Int64
	mu                       sync.Mutex
	completed                map[int64]int // completions written, per job
	completeErrs, claimFails atomic.Int64
}

func (c *pipeClaimer) record(ls []queue.Lease, err error) {
	var lost *queue.LeaseLostError
	gone := map[int64]bool{}
	if errors.As(err, &lost) {
		for _, id := range lost.IDs {
			gone[id] = true
		}
	} else if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range ls {
		if !gone[l.ID] {
			c.completed[l.ID]++
		}
	}
}

func (c *pipeClaimer) Complete(ctx context.Context, ls []queue.Lease) error {
	err := c.Claimer.Complete(ctx, ls)
	c.record(ls, err)
	return err
}

func (c *pipeClaimer) CompleteClaim(ctx context.Context, p queue.CompleteClaimParams) queue.CompleteClaimResult {
	n := c.calls.Add(1)
	fail := c.failEvery > 0 && n%c.failEvery == 0
	if len(p.Complete) > 0 {
		c.pipelined.Add(int64(len(p.Complete)))
	}
	var res queue.CompleteClaimResult
	if len(p.Complete) > 0 && c.stealOnce.CompareAndSwap(true, false) {
		c.store.Steal(p.Complete[0].ID)
		c.stolen.Store(p.Complete[0].ID)
	}
	if fail && c.failComplete {
		c.completeErrs.Add(1)
		res.CompleteErr = errors.New("connection reset by peer")
	} else {
		res.CompleteErr = c.Claimer.Complete(ctx, p.Complete)
		c.record(p.Complete, res.CompleteErr)
	}
	if fail && c.failClaim {
		c.claimFails.Add(1)
		res.ClaimErr = errors.New("connection reset by peer")
		return res
	}
	res.Jobs, res.ClaimErr = c.Claimer.Claim(ctx, p.Queue, p.N)
	return res
}

var _ queue.CompleteClaimer = (*pipeClaimer)(nil)

// runPipelined runs n jobs through a Worker over pc and returns the
// worker's stats once every job is gone.
func runPipelined(t *testing.T, pc *pipeClaimer, n int, hooks queue.Hooks) queue.WorkerStats {
	t.Helper()
	pc.store = memq.New(200 * time.Millisecond)
	pc.completed = map[int64]int{}
	d := &wrapDriver{Driver: pc.store.Driver(), wrap: func(c queue.Claimer) queue.Claimer { pc.Claimer = c; return pc }}
	q, _ := queue.New(d, queue.Config{})
	ctx := context.Background()
	jobs := make([]queue.NewJob, n)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: "p"}
	}
	if _, err := q.Enqueue(ctx, jobs...); err != nil {
		t.Fatal(err)
	}
	w, err := queue.NewWorker(q, func(ctx context.Context, j *queue.Job) error {
		// Slow enough that the claim loop waits for slots while runs end.
		time.Sleep(time.Duration(j.ID%3) * time.Millisecond)
		return nil
	}, queue.WorkerConfig{Queue: "p", Concurrency: 8, BatchSize: 4, PollInterval: 10 * time.Millisecond, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	waitFor(t, "every job to end", func() bool { st := w.Stats(); return st.Completed+st.LeasesLost >= int64(n) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	return w.Stats()
}

// checkOnce fails unless every one of n jobs was completed exactly once.
func (c *pipeClaimer) checkOnce(t *testing.T, n int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.completed) != n {
		t.Errorf("%d jobs completed, want %d", len(c.completed), n)
	}
	for id, k := range c.completed {
		if k != 1 {
			t.Errorf("job %d completed %d times", id, k)
		}
	}
	if c.pipelined.Load() == 0 {
		t.Error("no completion went with a claim")
	}
}

// Completions that wait for the next claim go with it, each once, and
// are counted as the plain path counts them.
func TestWorkerCompletesWithClaims(t *testing.T) {
	const n = 300
	pc := &pipeClaimer{}
	h := newRecHooks()
	st := runPipelined(t, pc, n, h)
	pc.checkOnce(t, n)
	if st.Claimed != n || st.Completed != n || st.LeasesLost != 0 {
		t.Errorf("stats %+v: want %d claimed and completed", st, n)
	}
	if _, _, out := h.snapshot(); out[queue.OutcomeCompleted] != n || !h.ctxOK {
		t.Errorf("hooks saw %v (contexts ok: %v), want %d completed", out, h.ctxOK, n)
	}
}

// A claim part that fails leaves its completions done: they are not
// written again, and the claim is retried.
func TestWorkerCompleteClaimClaimFails(t *testing.T) {
	const n = 200
	pc := &pipeClaimer{failEvery: 3, failClaim: true}
	st := runPipelined(t, pc, n, nil)
	pc.checkOnce(t, n)
	if pc.claimFails.Load() == 0 {
		t.Fatal("no claim part failed")
	}
	if st.Completed != n || st.LeasesLost != 0 || st.ClaimErrors != pc.claimFails.Load() {
		t.Errorf("stats %+v: want %d completed, %d claim errors", st, n, pc.claimFails.Load())
	}
}

// A completion part that fails is written again the plain way, once.
func TestWorkerCompleteClaimCompleteFails(t *testing.T) {
	const n = 200
	pc := &pipeClaimer{failEvery: 2, failComplete: true}
	st := runPipelined(t, pc, n, nil)
	pc.checkOnce(t, n)
	if pc.completeErrs.Load() == 0 {
		t.Fatal("no completion part failed")
	}
	if st.Completed != n || st.LeasesLost != 0 || st.ClaimErrors != 0 {
		t.Errorf("stats %+v: want %d completed", st, n)
	}
}

// A lease a CompleteClaim finds lost is reported as Complete's would be:
// counted and told to the hooks; the job stays its new holder's.
func TestWorkerCompleteClaimLostLease(t *testing.T) {
	const n = 50
	pc := &pipeClaimer{}
	pc.stealOnce.Store(true)
	h := newRecHooks()
	st := runPipelined(t, pc, n, h)
	id := pc.stolen.Load()
	if id == 0 {
		t.Fatal("no lease was stolen")
	}
	if st.LeasesLost != 1 || st.Completed != n-1 {
		t.Errorf("stats %+v: want 1 lease lost and %d completed", st, n-1)
	}
	pc.mu.Lock()
	k := pc.completed[id]
	pc.mu.Unlock()
	if k != 0 {
		t.Errorf("the stolen job was completed %d times", k)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.lost) != 1 || h.lost[0] != id || h.outcomes[queue.OutcomeLeaseLost] != 1 {
		t.Errorf("hooks saw lost %v and %v, want job %d lost once", h.lost, h.outcomes, id)
	}
}
