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

// TestEndMatchesEachLeaseOnItsToken: Complete, Release and Extend take
// leases of several claims (tokens) in one batch, interleaved, and match
// each job on its own lease's token: a job's id under another claim's
// token is reported lost and changes nothing.
func TestEndMatchesEachLeaseOnItsToken(t *testing.T) {
	q := newQ(t, queue.Config{})
	for range 6 {
		enqueue(t, q, queue.NewJob{Queue: "tok"})
	}
	c := newClaimer(t, q)
	a := claim(t, c, "tok", 3)
	b := claim(t, c, "tok", 3)
	if len(a) != 3 || len(b) != 3 || a[0].Token == b[0].Token {
		t.Fatalf("claimed %d and %d jobs (tokens %d, %d), want 3 and 3 under two tokens", len(a), len(b), a[0].Token, b[0].Token)
	}
	forged := queue.Lease{ID: a[2].ID, Token: b[0].Token}
	mixed := []queue.Lease{a[0].Lease(), b[0].Lease(), a[1].Lease(), forged, b[1].Lease()}
	wantLost := func(op string, err error) {
		t.Helper()
		var lost *queue.LeaseLostError
		if !errors.As(err, &lost) || !slices.Equal(lost.IDs, []int64{forged.ID}) {
			t.Fatalf("%s: %v, want only the lease of job %d lost", op, err, forged.ID)
		}
	}
	wantLost("Extend", c.Extend(ctxT(t), mixed))
	wantLost("Release", c.Release(ctxT(t), mixed[:4]))
	wantCounts(t, q, "tok", 3, 0, 3, 0) // a[2], b[1], b[2] still held
	wantLost("Complete", c.Complete(ctxT(t), []queue.Lease{b[1].Lease(), forged, b[2].Lease()}))
	wantCounts(t, q, "tok", 3, 0, 1, 0) // a[2] still held
	if err := c.Complete(ctxT(t), []queue.Lease{a[2].Lease()}); err != nil {
		t.Fatalf("Complete of a[2]: %v", err)
	}
	wantCounts(t, q, "tok", 3, 0, 0, 0)
}

func TestLeasesJSON(t *testing.T) {
	for _, tc := range []struct {
		in   []queue.Lease
		want string
	}{
		{nil, `{}`},
		{[]queue.Lease{{ID: 1, Token: 7}}, `{"7":[1]}`},
		{[]queue.Lease{{ID: 1, Token: 7}, {ID: 2, Token: 9}, {ID: 3, Token: 7}, {ID: 4, Token: -5}}, `{"7":[1,3],"9":[2],"-5":[4]}`},
	} {
		if got := leasesJSON(tc.in); got != tc.want {
			t.Errorf("leasesJSON(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
