package queue

import (
	"testing"
	"time"
)

// TestGatherWaitsForHalfABatch: a claim that would take fewer than half a
// batch waits for more handler slots to free (up to gatherWait); one that
// has half a batch or more claims at once.
func TestGatherWaitsForHalfABatch(t *testing.T) {
	newRun := func() *runState {
		// A wait that is not cut short by slots ends the test by its deadline.
		return &runState{w: &Worker{cfg: WorkerConfig{BatchSize: 10}}, slots: make(chan struct{}, 10), gatherWait: time.Hour}
	}

	r := newRun()
	for range 4 {
		r.slots <- struct{}{}
	}
	if got := r.gather(1); got != 5 {
		t.Fatalf("with half a batch free, gather took %d slots, want 5", got)
	}

	r = newRun()
	r.slots <- struct{}{}
	go func() {
		for range 8 {
			time.Sleep(time.Millisecond)
			r.slots <- struct{}{}
		}
	}()
	if got := r.gather(1); got != 10 {
		t.Fatalf("with 2 of 10 free, gather took %d slots, want it to wait for the other 8", got)
	}
}
