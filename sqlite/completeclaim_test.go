package sqlite

import (
	"errors"
	"slices"
	"testing"

	"github.com/dbqueue/dbq/queue"
)

// TestCompleteClaimCompletionSurvivesFailedClaim: when the claim part of
// CompleteClaim fails after its DELETE ran in the same transaction, which
// then rolls back, the completion still ends committed, as if it had
// committed on its own first; lost leases are reported either way.
func TestCompleteClaimCompletionSurvivesFailedClaim(t *testing.T) {
	q := newQ(t, queue.Config{})
	d := driverOf(t, q)
	for range 6 {
		enqueue(t, q, queue.NewJob{Queue: "cc"})
	}
	c := newClaimer(t, q)
	other := newClaimer(t, q)
	mine := claim(t, c, "cc", 3)
	theirs := claim(t, other, "cc", 1)
	if len(mine) != 3 || len(theirs) != 1 {
		t.Fatalf("claimed %d and %d jobs, want 3 and 1", len(mine), len(theirs))
	}
	stray := queue.Lease{ID: theirs[0].ID, Token: mine[0].Token}

	// The claim statement reads the queues table and the DELETE does not:
	// without it, the claim part fails after the DELETE succeeded.
	queues := d.names.WithDefaults().Prefix + "queues"
	rename := func(from, to string) {
		t.Helper()
		if _, err := d.db.ExecContext(ctxT(t), `ALTER TABLE "`+from+`" RENAME TO "`+to+`"`); err != nil {
			t.Fatal(err)
		}
	}
	rename(queues, queues+"_hidden")
	res := c.CompleteClaim(ctxT(t), queue.CompleteClaimParams{Complete: append(queue.Leases(mine), stray), Queue: "cc", N: 2})
	rename(queues+"_hidden", queues)

	if !errors.Is(res.ClaimErr, queue.ErrNotMigrated) || len(res.Jobs) != 0 {
		t.Fatalf("claim part: %d jobs, %v; want ErrNotMigrated", len(res.Jobs), res.ClaimErr)
	}
	var lost *queue.LeaseLostError
	if !errors.As(res.CompleteErr, &lost) || !slices.Equal(lost.IDs, []int64{stray.ID}) {
		t.Fatalf("complete part: %v, want only the lease of job %d lost", res.CompleteErr, stray.ID)
	}
	// mine are gone, theirs still held, two ready.
	wantCounts(t, q, "cc", 2, 0, 1, 0)
	// Close would give back what c still lists as held.
	c.mu.Lock()
	held := len(c.held)
	c.mu.Unlock()
	if held != 0 {
		t.Fatalf("claimer still lists %d completed jobs as held", held)
	}
	if err := c.Complete(ctxT(t), queue.Leases(mine)); !errors.As(err, &lost) || len(lost.IDs) != len(mine) {
		t.Fatalf("completing them again: %v, want their leases lost", err)
	}
}
