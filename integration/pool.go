package integration

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// LeavesPoolSessionsAsFound: on a pool of the user's own, a Worker, a
// claimer that claims, completes, is cancelled mid-claim and closes with
// jobs held, Stats and enqueues leave every connection of the pool with
// the session settings it had (claim contract 7).
func testPoolSessions(t *testing.T, s *suite) {
	if s.h.UserPool == nil {
		if s.h.NoUserPool == "" {
			t.Fatalf("the %s harness has no UserPool and says no reason (Harness.NoUserPool): every dialect reads its user pool's sessions", s.h.Dialect)
		}
		t.Skipf("the %s harness has no UserPool: %s", s.h.Dialect, s.h.NoUserPool)
	}
	q, sessions := s.h.UserPool(t, queue.Config{})
	before := sessions(t)
	if len(before) == 0 {
		t.Fatal("UserPool's sessions read no connection")
	}
	found := map[string]bool{}
	for _, m := range before {
		found[settingsLine(m)] = true
	}

	ctx := ctxFor(t)
	const n = 100
	enqueueN(t, q, "pool", n)
	w, err := queue.NewWorker(q, func(context.Context, *queue.Job) error { return nil },
		queue.WorkerConfig{Queue: "pool", Concurrency: 4, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r := startWorker(t, ctx, w)
	until(t, fmt.Sprintf("%d completed jobs", n), func() bool { return w.Stats().Completed >= n }, r)
	if err := r.stop(0); err != nil {
		t.Fatalf("Worker.Run: %v", err)
	}
	if got := w.Stats().Completed; got != n {
		t.Fatalf("the Worker completed %d of %d jobs", got, n)
	}

	enqueueN(t, q, "pool", 3)
	c, err := q.NewClaimer(ctx)
	if err != nil {
		t.Fatalf("NewClaimer: %v", err)
	}
	complete(t, c, claim(t, c, "pool", 1))
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Claim(cancelled, "pool", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Claim with a cancelled ctx: %v, want context.Canceled", err)
	}
	claim(t, c, "pool", 1) // held at Close, which releases it
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wantCounts(t, q, "pool", 2, 0, 0, 0) // one completed, one released

	for i, m := range sessions(t) {
		if line := settingsLine(m); !found[line] {
			t.Errorf("connection %d of the user's pool after dbq ran: %s; before, its connections had: %s",
				i+1, line, strings.Join(slices.Sorted(maps.Keys(found)), " | "))
		}
	}
}

// settingsLine renders one connection's settings in name order.
func settingsLine(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s=%s ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}
