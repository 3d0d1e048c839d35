package postgres

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/dbqueue/dbq/queue"
)

// TestCompleteClaim: CompleteClaim completes what Complete would, reports
// the leases it does not hold as Complete does, and claims what Claim
// would. A claim part that fails leaves the completions done. The advisory
// claimer is not a CompleteClaimer (see the package doc).
func TestCompleteClaim(t *testing.T) {
	t.Parallel()
	for _, s := range []struct {
		name     string
		strategy Strategy
	}{{"skiplocked", SkipLocked}} {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			q := newQueue(t, Config{Strategy: s.strategy}, true)
			enqueueN(t, q, "cc", 8)
			c := newClaimer(t, q)
			cc, ok := c.(queue.CompleteClaimer)
			if !ok {
				t.Fatalf("%T is not a queue.CompleteClaimer", c)
			}
			other := newClaimer(t, q)
			first := claim(t, c, "cc", 3)
			theirs := claim(t, other, "cc", 1)
			ctx := testCtx(t)
			gone := func(jobs []*queue.Job) int {
				t.Helper()
				return countRows(t, q, fmt.Sprintf("id = ANY('{%s}'::int8[])", idList(jobs)))
			}
			locks := func(want []*queue.Job) {
				t.Helper()
				a, ok := c.(*AdvisoryClaimer)
				if !ok {
					return
				}
				got := lockedIDs(t, a.backendPID())
				w := ids(want)
				slices.Sort(w)
				if !slices.Equal(got, w) && !(len(got) == 0 && len(w) == 0) {
					t.Fatalf("the claimer holds locks of %v, want %v", got, w)
				}
			}

			// Its own three and a lease of another claimer's job.
			stray := queue.Lease{ID: theirs[0].ID, Token: first[0].Token}
			res := cc.CompleteClaim(ctx, queue.CompleteClaimParams{Complete: append(leases(first), stray), Queue: "cc", N: 3})
			var lost *queue.LeaseLostError
			if !errors.As(res.CompleteErr, &lost) || !slices.Equal(lost.IDs, []int64{stray.ID}) {
				t.Fatalf("complete part: %v, want lease %d lost", res.CompleteErr, stray.ID)
			}
			if res.ClaimErr != nil || len(res.Jobs) != 3 {
				t.Fatalf("claim part: %d jobs, %v; want 3", len(res.Jobs), res.ClaimErr)
			}
			for _, j := range res.Jobs {
				if j.ID == stray.ID || slices.Contains(ids(first), j.ID) || j.State != queue.StateClaimed || j.Token == 0 {
					t.Fatalf("claimed job %d (state %s, token %d): held elsewhere, completed, or not claimed", j.ID, j.State, j.Token)
				}
			}
			if n := gone(first); n != 0 {
				t.Fatalf("%d completed jobs still stored", n)
			}
			if n := countRows(t, q, ""); n != 5 {
				t.Fatalf("%d jobs stored, want 5", n)
			}
			locks(res.Jobs)

			// The claim reads the pause table; without it the claim fails,
			// and the completion, committed on its own, stays done.
			second := res.Jobs
			if _, err := testPool(t).Exec(ctx, "DROP TABLE "+driverOf(t, q).stmts.queues); err != nil {
				t.Fatal(err)
			}
			res = cc.CompleteClaim(ctx, queue.CompleteClaimParams{Complete: leases(second), Queue: "cc", N: 3})
			if res.CompleteErr != nil || res.ClaimErr == nil || len(res.Jobs) != 0 {
				t.Fatalf("complete part %v, claim part %d jobs, %v; want completed and a failed claim",
					res.CompleteErr, len(res.Jobs), res.ClaimErr)
			}
			if n := gone(second); n != 0 {
				t.Fatalf("%d completed jobs still stored after the claim failed", n)
			}
			locks(nil)
			// Completing them again finds them gone, as Complete would.
			if err := c.Complete(ctx, leases(second)); !errors.As(err, &lost) || len(lost.IDs) != 3 {
				t.Fatalf("second Complete: %v, want 3 leases lost", err)
			}
			if err := other.Complete(ctx, leases(theirs)); err != nil {
				t.Fatal(err)
			}
			if n := countRows(t, q, ""); n != 1 {
				t.Fatalf("%d jobs stored, want 1", n)
			}
		})
	}
}

func idList(jobs []*queue.Job) string {
	s := ""
	for i, j := range jobs {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(j.ID)
	}
	return s
}
