package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// Every wait of a case on a Worker or a claimer ends by the case's
// deadline, and a wait on a Worker also ends when its Run returns: a
// Worker that fails at start fails the case at once, with Run's error,
// instead of hanging the suite.

// caseDeadline is when a case's waits give up: testTimeout from now, or a
// little before the test binary's -timeout when that comes first (so the
// case reports what it waited for rather than the binary panicking).
func caseDeadline(t *testing.T) time.Time {
	end := time.Now().Add(testTimeout)
	if d, ok := t.Deadline(); ok && d.Add(-5*time.Second).Before(end) {
		end = d.Add(-5 * time.Second)
	}
	return end
}

// runningWorker is a Worker whose Run goes on in a goroutine of the case.
type runningWorker struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan error // Run's result
	end    time.Time
}

// startWorker runs w until ctx ends or stop is called. The test's cleanup
// cancels it too.
func startWorker(t *testing.T, ctx context.Context, w *queue.Worker) *runningWorker {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	r := &runningWorker{t: t, cancel: cancel, done: make(chan error, 1), end: caseDeadline(t)}
	go func() { r.done <- w.Run(ctx) }()
	return r
}

// await returns the next value from ch. The test fails if the Worker's Run
// returns first or nothing comes by the case's deadline.
func await[T any](r *runningWorker, ch <-chan T, what string) T {
	r.t.Helper()
	timer := time.NewTimer(time.Until(r.end))
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case err := <-r.done:
		r.t.Fatalf("waiting for %s: Worker.Run returned: %v", what, err)
	case <-timer.C:
		r.t.Fatalf("waiting for %s: nothing by the case's deadline", what)
	}
	panic("unreachable")
}

// until polls cond until it holds. The test fails if the Run of any of
// workers returns first or cond does not hold by the case's deadline.
func until(t *testing.T, what string, cond func() bool, workers ...*runningWorker) {
	t.Helper()
	end := caseDeadline(t)
	for !cond() {
		for _, r := range workers {
			select {
			case err := <-r.done:
				t.Fatalf("waiting for %s: Worker.Run returned: %v", what, err)
			default:
			}
		}
		if time.Now().After(end) {
			t.Fatalf("waiting for %s: not by the case's deadline", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop cancels the Worker and returns Run's error. The test fails if Run
// does not return within bound (0: by the case's deadline).
func (r *runningWorker) stop(bound time.Duration) error {
	r.t.Helper()
	r.cancel()
	wait := time.Until(r.end)
	if bound > 0 {
		wait = min(wait, bound)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case err := <-r.done:
		return err
	case <-timer.C:
		r.t.Fatalf("Worker.Run did not return within %v of its cancel", wait.Round(time.Millisecond))
	}
	panic("unreachable")
}

// waitGroup waits for wg, failing the test if it is not done by the case's
// deadline (the goroutines of claimers or producers it waits for follow a
// ctx that ends then, so only a wait that ignores its ctx gets here).
func waitGroup(t *testing.T, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	timer := time.NewTimer(time.Until(caseDeadline(t)))
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("%s did not end by the case's deadline", what)
	}
}
