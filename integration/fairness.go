package integration

import (
	"fmt"
	"testing"

	"github.com/dbqueue/dbq/queue"
)

// fairClaims is how many claims of its queue the oldest ready job may wait
// while one claimer claims two queues in turn, for a claimer that takes
// jobs in claim order: a claimer may start its walks past the head (the
// PostgreSQL claimers do, after a full batch), but must come back to the
// head of each queue within a bounded number of that queue's claims.
const fairClaims = 20

// ClaimsEachQueueFairly: one claimer that claims queues a and b in turn
// takes the oldest job of each within a bounded number of that queue's
// claims once it is free — the bound a claimer working only one queue
// keeps. Where the claim picks at random in a window (Harness.ClaimWindow)
// the bound grows with the window.
func testFairAcrossQueues(t *testing.T, s *suite) {
	const (
		n      = 5  // jobs per claim
		before = 10 // rounds while the oldest jobs are held elsewhere
		per    = 600
	)
	q := s.queue(t, queue.Config{})
	oldest := map[string]int64{}
	for _, name := range []string{"fair-a", "fair-b"} {
		oldest[name] = enqueueN(t, q, name, 1)[0]
	}
	// The rest in one batch, the queues' jobs taking turns: the two queues
	// advance side by side in (priority, run_at, id) order, so that a claim
	// of one queue that started where the other's last claim began would
	// keep passing the oldest job over.
	rest := make([]queue.NewJob, 0, 2*per)
	for i := range per {
		p := fmt.Appendf(nil, "job-%d", i)
		rest = append(rest, queue.NewJob{Queue: "fair-a", Payload: p}, queue.NewJob{Queue: "fair-b", Payload: p})
	}
	enqueue(t, q, rest...)
	// Another claimer holds the oldest job of each queue for a while.
	other := s.claimer(t, q)
	var heldElsewhere []*queue.Job
	for name, id := range oldest {
		got := claim(t, other, name, 1)
		if len(got) != 1 || got[0].ID != id {
			t.Fatalf("the first claim of %s took %v, want its oldest job %d", name, queue.IDs(got), id)
		}
		heldElsewhere = append(heldElsewhere, got...)
	}
	c := s.claimer(t, q)
	round := func(name string) bool {
		jobs := claim(t, c, name, n)
		found := false
		for _, j := range jobs {
			found = found || j.ID == oldest[name]
		}
		if len(jobs) > 0 {
			complete(t, c, jobs)
		}
		return found
	}
	for range before {
		for _, name := range []string{"fair-a", "fair-b"} {
			if round(name) {
				t.Fatalf("%s: claimed its oldest job while another claimer held it", name)
			}
		}
	}
	if err := other.Release(ctxFor(t), queue.Leases(heldElsewhere)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	bound := fairClaims
	if s.h.ClaimWindow > 0 {
		bound += 10 * s.h.ClaimWindow / n
	}
	waited := map[string]int{}
	for r := 0; len(waited) < 2 && r < per/n+1; r++ {
		for _, name := range []string{"fair-a", "fair-b"} {
			if _, ok := waited[name]; !ok && round(name) {
				waited[name] = r + 1
			}
		}
	}
	for _, name := range []string{"fair-a", "fair-b"} {
		w, ok := waited[name]
		switch {
		case !ok:
			t.Errorf("%s: its oldest job %d was never claimed again while the queue drained", name, oldest[name])
		case w > bound:
			t.Errorf("%s: its oldest job waited %d claims of its queue once free, want at most %d", name, w, bound)
		default:
			t.Logf("%s: oldest job claimed at the %d. claim of its queue once free", name, w)
		}
	}
}
