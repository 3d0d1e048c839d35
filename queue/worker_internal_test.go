package queue

import (
	"context"
	"testing"
)

// Without Hooks, running a job and tallying its result allocate nothing
// beyond what the handler does.
func TestRunAllocatesNothingWithoutHooks(t *testing.T) {
	w := &Worker{handler: func(context.Context, *Job) error { return nil }, cfg: WorkerConfig{Backoff: DefaultBackoff}}
	j := &Job{ID: 1, MaxAttempts: 3}
	ctx := context.Background()
	n := testing.AllocsPerRun(200, func() {
		r := w.run(ctx, j)
		if w.tally(&r, false, false) != OutcomeCompleted {
			t.Fatal("not completed")
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per job, want 0", n)
	}
}
