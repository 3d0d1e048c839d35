package integration

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// CompleteRemovesJobs: completed jobs leave the table.
func testComplete(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	enqueueN(t, q, "done", 5)
	c := s.claimer(t, q)
	jobs := claim(t, c, "done", 5)
	complete(t, c, jobs[:3])
	wantCounts(t, q, "done", 0, 0, 2, 0)
	complete(t, c, jobs[3:])
	wantCounts(t, q, "done", 0, 0, 0, 0)
	if got := s.drainAll(t, q, "done"); len(got) != 0 {
		t.Fatalf("completed jobs claimed again: %v", got)
	}
}

// CompleteClaimCompletesThenClaims: a queue.CompleteClaimer completes what
// Complete would, reports a lease it does not hold as Complete does, and
// claims what Claim would, none of it a job just completed or held
// elsewhere; completing the same leases again finds them lost. Skipped
// for a claimer without it.
func testCompleteClaim(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	enqueueN(t, q, "cc", 8)
	c := s.claimer(t, q)
	cc, ok := c.(queue.CompleteClaimer)
	if !ok {
		t.Skipf("%T is not a queue.CompleteClaimer", c)
	}
	other := s.claimer(t, q)
	mine := claim(t, c, "cc", 3)
	theirs := claim(t, other, "cc", 1)
	if len(mine) != 3 || len(theirs) != 1 {
		t.Fatalf("claimed %d and %d jobs, want 3 and 1", len(mine), len(theirs))
	}
	stray := queue.Lease{ID: theirs[0].ID, Token: mine[0].Token}
	res := cc.CompleteClaim(ctxFor(t), queue.CompleteClaimParams{Complete: append(leases(mine), stray), Queue: "cc", N: 3})
	var lost *queue.LeaseLostError
	if !errors.As(res.CompleteErr, &lost) || !sameIDs(lost.IDs, []int64{stray.ID}) {
		t.Fatalf("complete part: %v, want the lease of job %d lost", res.CompleteErr, stray.ID)
	}
	if res.ClaimErr != nil || len(res.Jobs) != 3 {
		t.Fatalf("claim part: %d jobs, %v; want 3", len(res.Jobs), res.ClaimErr)
	}
	for _, j := range res.Jobs {
		if j.ID == stray.ID || slices.Contains(queue.IDs(mine), j.ID) {
			t.Fatalf("claimed job %d, completed or held elsewhere", j.ID)
		}
	}
	if s.h.HeldLocks != nil {
		if got := s.h.HeldLocks(t, c); !sameIDs(got, ids(res.Jobs)) {
			t.Fatalf("after CompleteClaim the claimer holds %v, want the jobs it just claimed %v", got, ids(res.Jobs))
		}
	}
	wantCounts(t, q, "cc", 1, 0, 4, 0)
	err := c.Complete(ctxFor(t), leases(mine))
	if !errors.As(err, &lost) || !sameIDs(lost.IDs, queue.IDs(mine)) {
		t.Fatalf("completing them again: %v, want their leases lost", err)
	}
	complete(t, c, res.Jobs)
	complete(t, other, theirs)
	wantCounts(t, q, "cc", 1, 0, 0, 0)
}

// RetryBacksOffAndKeepsError: a retried job comes back after its delay with
// attempt+1 and the error kept; after max_attempts it is dead.
func testRetry(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	enqueue(t, q,
		queue.NewJob{Queue: "retry", Payload: []byte("a"), MaxAttempts: 2},
		queue.NewJob{Queue: "retry", Payload: []byte("b"), MaxAttempts: 5},
	)
	c := s.claimer(t, q)
	jobs := claim(t, c, "retry", 2)
	long := strings.Repeat("é", queue.MaxErrorBytes) // over the limit in bytes
	err := c.Retry(ctxFor(t), []queue.RetryParams{
		{Lease: jobs[0].Lease(), Error: "boom 1"},
		{Lease: jobs[1].Lease(), Error: long, Delay: time.Hour},
	})
	if err != nil {
		t.Fatalf("Retry: %v", err)
	}
	wantCounts(t, q, "retry", 1, 1, 0, 0)
	again := claim(t, c, "retry", 2)
	if len(again) != 1 || again[0].ID != jobs[0].ID {
		t.Fatalf("after retry claimed %v, want only %d (the other is an hour out)", ids(again), jobs[0].ID)
	}
	if again[0].Attempt != 1 || again[0].LastError != "boom 1" {
		t.Fatalf("attempt %d last_error %q, want 1 and %q", again[0].Attempt, again[0].LastError, "boom 1")
	}
	if err := c.Retry(ctxFor(t), []queue.RetryParams{{Lease: again[0].Lease(), Error: "boom 2"}}); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	wantCounts(t, q, "retry", 0, 1, 0, 1)
	if got := claim(t, c, "retry", 2); len(got) != 0 {
		t.Fatalf("dead job claimed: %v", ids(got))
	}
}

// RetryDeadMakesJobDead: Dead ends a job at once, attempts left or not.
func testRetryDead(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	enqueueN(t, q, "kill", 1)
	c := s.claimer(t, q)
	jobs := claim(t, c, "kill", 1)
	if err := c.Retry(ctxFor(t), []queue.RetryParams{{Lease: jobs[0].Lease(), Error: "bad input", Dead: true}}); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	wantCounts(t, q, "kill", 0, 0, 0, 1)
}

// ReleaseSpendsNoAttempt: a released job is claimable at once, attempt
// unchanged.
func testRelease(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	enqueueN(t, q, "rel", 3)
	a, b := s.claimer(t, q), s.claimer(t, q)
	jobs := claim(t, a, "rel", 3)
	if err := a.Release(ctxFor(t), leases(jobs[:2])); err != nil {
		t.Fatalf("Release: %v", err)
	}
	got := claim(t, b, "rel", 3)
	if !sameIDs(ids(got), ids(jobs[:2])) {
		t.Fatalf("after release b claimed %v, want %v", ids(got), ids(jobs[:2]))
	}
	for _, j := range got {
		if j.Attempt != 0 {
			t.Errorf("released job %d has attempt %d", j.ID, j.Attempt)
		}
	}
	complete(t, b, got)
	complete(t, a, jobs[2:])
}

// StaleTokenLosesLease: ending or renewing a claim that is not the caller's
// gives ErrLeaseLost and changes nothing; the rest of the batch applies.
func testStaleToken(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	enqueueN(t, q, "stale", 2)
	c := s.claimer(t, q)
	jobs := claim(t, c, "stale", 2)
	forged := queue.Lease{ID: jobs[0].ID, Token: jobs[0].Token + 1}
	unknown := queue.Lease{ID: jobs[1].ID + 1_000_000, Token: jobs[1].Token}
	ctx := ctxFor(t)
	for name, fn := range map[string]func() error{
		"Complete": func() error { return c.Complete(ctx, []queue.Lease{forged, unknown}) },
		"Release":  func() error { return c.Release(ctx, []queue.Lease{forged}) },
		"Extend":   func() error { return c.Extend(ctx, []queue.Lease{forged}) },
		"Retry":    func() error { return c.Retry(ctx, []queue.RetryParams{{Lease: forged, Error: "x"}}) },
	} {
		err := fn()
		wantErr(t, name+" with a forged token", err, queue.ErrLeaseLost)
		var lost *queue.LeaseLostError
		if !errors.As(err, &lost) || len(lost.IDs) == 0 {
			t.Fatalf("%s: error %v is not a *LeaseLostError with ids", name, err)
		}
	}
	wantCounts(t, q, "stale", 0, 0, 2, 0)
	// A mixed batch: the good lease applies, the bad one is reported.
	err := c.Complete(ctx, []queue.Lease{forged, jobs[1].Lease()})
	var lost *queue.LeaseLostError
	if !errors.As(err, &lost) || len(lost.IDs) != 1 || lost.IDs[0] != jobs[0].ID {
		t.Fatalf("mixed Complete: %v, want *LeaseLostError for [%d]", err, jobs[0].ID)
	}
	wantCounts(t, q, "stale", 0, 0, 1, 0)
	complete(t, c, jobs[:1])
	wantCounts(t, q, "stale", 0, 0, 0, 0)
	// Completing twice: the second is lost.
	enqueueN(t, q, "stale", 1)
	j := claim(t, c, "stale", 1)
	complete(t, c, j)
	wantErr(t, "second Complete", c.Complete(ctx, leases(j)), queue.ErrLeaseLost)
}

// ExpiredLeaseIsReclaimed: a lease not extended expires, another claimer
// gets the job, and the first holder's late Complete is ErrLeaseLost.
// Extend keeps a lease alive past its first term.
func testLeaseExpiry(t *testing.T, s *suite) {
	if s.h.LockBased {
		t.Skip("claims are locks held for the connection's life; see DeadClaimerGivesJobsBack")
	}
	const lease = time.Second
	q := s.queue(t, queue.Config{Lease: lease})
	enqueueN(t, q, "lease", 2)
	a, b := s.claimer(t, q), s.claimer(t, q)
	jobs := claim(t, a, "lease", 2)
	if jobs[0].ClaimedUntil.IsZero() {
		t.Error("lease claim has zero ClaimedUntil")
	}
	// Keep job 0 alive by extending it; let job 1 expire.
	deadline := time.Now().Add(s.leaseWait(lease))
	for time.Now().Before(deadline) {
		if err := a.Extend(ctxFor(t), leases(jobs[:1])); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		time.Sleep(lease / 4)
	}
	var got []*queue.Job
	for try := 0; try < 20 && len(got) == 0; try++ {
		got = claim(t, b, "lease", 10)
		if len(got) == 0 {
			time.Sleep(lease / 4)
		}
	}
	if len(got) != 1 || got[0].ID != jobs[1].ID {
		t.Fatalf("after expiry b claimed %v, want [%d]", ids(got), jobs[1].ID)
	}
	if got[0].Token == jobs[1].Token {
		t.Error("re-claim kept the old token")
	}
	if got[0].Attempt != 1 || !strings.Contains(got[0].LastError, "lease expired") {
		t.Errorf("re-claimed job: attempt %d, last_error %q; the run that lost its lease counts as a failed attempt",
			got[0].Attempt, got[0].LastError)
	}
	wantErr(t, "late Complete", a.Complete(ctxFor(t), leases(jobs[1:])), queue.ErrLeaseLost)
	complete(t, b, got)
	complete(t, a, jobs[:1])
	wantCounts(t, q, "lease", 0, 0, 0, 0)
}

// DeadClaimerGivesJobsBack: a claimer whose connection dies without ending
// its claims gives its jobs back — at once for locks, after the lease for
// leases — and its late Complete changes nothing.
func testDeadClaimer(t *testing.T, s *suite) {
	const lease = time.Second
	q := s.queue(t, queue.Config{Lease: lease})
	enqueueN(t, q, "dead", 10)
	victim, err := q.NewClaimer(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	held := claim(t, victim, "dead", 6)
	s.h.Kill(t, victim)
	b := s.claimer(t, q)
	limit := s.leaseWait(lease) + 5*time.Second
	if s.h.LockBased {
		limit = 3 * time.Second // the server notices the cut connection; no timeout involved
	}
	// A lease that ran out costs the job an attempt; a lock that went with
	// its connection costs nothing (nothing was written to take it).
	wantAttempt := map[int64]int{}
	if !s.h.LockBased {
		for _, j := range held {
			wantAttempt[j.ID] = 1
		}
	}
	var got []int64
	for deadline := time.Now().Add(limit); len(got) < 10 && time.Now().Before(deadline); {
		jobs := claim(t, b, "dead", 10)
		for _, j := range jobs {
			if j.Attempt != wantAttempt[j.ID] {
				t.Errorf("job %d came back with attempt %d, want %d", j.ID, j.Attempt, wantAttempt[j.ID])
			}
		}
		got = append(got, ids(jobs)...)
		complete(t, b, jobs)
		if len(got) < 10 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if len(got) != 10 || len(distinct(got)) != 10 {
		t.Fatalf("got %d of 10 jobs back within %v after the claimer died", len(got), limit)
	}
	err = victim.Complete(context.Background(), leases(held))
	wantErr(t, "dead claimer's Complete after its jobs were re-claimed", err, queue.ErrLeaseLost)
	wantCounts(t, q, "dead", 0, 0, 0, 0)
}
