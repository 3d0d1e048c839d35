package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// ExactlyOnce: 16 claimers and 2 producers over 20,000 jobs; a ledger proves
// every job was claimed and completed exactly once.
func testExactlyOnce(t *testing.T, s *suite) {
	const (
		total     = 20_000
		producers = 2
		claimers  = 16
	)
	if testing.Short() {
		t.Skip("long in -short mode")
	}
	q := s.queue(t, queue.Config{})
	ctx := ctxFor(t)
	var (
		mu       sync.Mutex
		ledger   = make(map[int64]int, total)
		enqueued = make(map[int64]bool, total)
		done     atomic.Int64
		wg       sync.WaitGroup
		errs     = make(chan error, producers+claimers)
	)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < total/producers; {
				n := min(1+rand.IntN(200), total/producers-i)
				batch := make([]queue.NewJob, n)
				for k := range batch {
					batch[k] = queue.NewJob{Queue: "once", Payload: fmt.Appendf(nil, "%d-%d", p, i+k), Priority: int16(rand.IntN(3))}
				}
				ids, err := q.Enqueue(ctx, batch...)
				if err != nil {
					errs <- fmt.Errorf("producer %d: %w", p, err)
					return
				}
				mu.Lock()
				for _, id := range ids {
					enqueued[id] = true
				}
				mu.Unlock()
				i += n
			}
		}()
	}
	start := time.Now()
	for range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := q.NewClaimer(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close(context.Background())
			for done.Load() < total && ctx.Err() == nil {
				jobs, err := c.Claim(ctx, "once", 1+rand.IntN(50))
				if err != nil {
					if queue.IsRetryable(err) {
						continue
					}
					errs <- fmt.Errorf("claim: %w", err)
					return
				}
				if len(jobs) == 0 {
					time.Sleep(time.Duration(1+rand.IntN(5)) * time.Millisecond)
					continue
				}
				mu.Lock()
				for _, j := range jobs {
					ledger[j.ID]++
				}
				mu.Unlock()
				if err := c.Complete(ctx, leases(jobs)); err != nil {
					errs <- fmt.Errorf("complete: %w", err)
					return
				}
				done.Add(int64(len(jobs)))
			}
		}()
	}
	waitGroup(t, &wg, "the producers and claimers")
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	dups := checkLedger(t, ledger, enqueued, total)
	wantCounts(t, q, "once", 0, 0, 0, 0)
	t.Logf("%s: %d jobs, %d producers, %d claimers, %d duplicates, %v (%.0f jobs/s)",
		s.h.Dialect, total, producers, claimers, dups, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds())
}

// checkLedger fails t for each job of ledger run other than once or never
// enqueued, and unless total ran; it returns the count of duplicates.
func checkLedger(t *testing.T, ledger map[int64]int, enqueued map[int64]bool, total int) int {
	t.Helper()
	dups := 0
	for id, n := range ledger {
		if n != 1 {
			dups++
			t.Errorf("job %d claimed and completed %d times", id, n)
		}
		if !enqueued[id] {
			t.Errorf("job %d claimed but never enqueued", id)
		}
	}
	if len(ledger) != total || len(enqueued) != total {
		t.Fatalf("ledger has %d jobs, %d enqueued, want %d", len(ledger), len(enqueued), total)
	}
	return dups
}

// HoldsExactlyItsLocks: after claims, partial completions, releases and
// retries a claimer holds locks for exactly the jobs it still holds.
func testHeldLocks(t *testing.T, s *suite) {
	if s.h.HeldLocks == nil {
		t.Fatalf("the %s harness has no HeldLocks: every harness reports what its claimers hold", s.h.Dialect)
	}
	q := s.queue(t, queue.Config{})
	enqueueN(t, q, "locks", 300)
	// Held by someone else, so the claim walks past rows it cannot lock.
	other := s.claimer(t, q)
	claim(t, other, "locks", 50)
	c := s.claimer(t, q)
	held := map[int64]*queue.Job{}
	check := func(step string) {
		t.Helper()
		var want []int64
		for id := range held {
			want = append(want, id)
		}
		if got := s.h.HeldLocks(t, c); !sameIDs(got, want) {
			t.Fatalf("%s: holds locks %d, holds jobs %d", step, len(got), len(want))
		}
	}
	for _, n := range []int{1, 100, 37} {
		for _, j := range claim(t, c, "locks", n) {
			held[j.ID] = j
		}
		check(fmt.Sprintf("after Claim(%d)", n))
	}
	var some []*queue.Job
	for _, j := range held {
		if len(some) == 40 {
			break
		}
		some = append(some, j)
	}
	complete(t, c, some[:20])
	if err := c.Release(ctxFor(t), leases(some[20:30])); err != nil {
		t.Fatal(err)
	}
	if err := c.Retry(ctxFor(t), []queue.RetryParams{{Lease: some[30].Lease(), Delay: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	for _, j := range some[:31] {
		delete(held, j.ID)
	}
	check("after Complete, Release and Retry")
	// A claim over a queue with nothing claimable takes nothing.
	claim(t, c, "empty", 10)
	check("after an empty claim")
}

// CancelledClaimLeaksNothing: claims cut off by their context at random
// moments leave no lock, no claim and no open transaction behind.
func testCancelledClaim(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{Lease: time.Hour})
	all := enqueueN(t, q, "cancel", 2000)
	c := s.claimer(t, q)
	var held []*queue.Job
	failures := 0
	pre, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Claim(pre, "cancel", 10); err == nil {
		t.Fatal("Claim with a cancelled context succeeded")
	}
	for i := range 60 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(3000))*time.Microsecond)
		jobs, err := c.Claim(ctx, "cancel", 50)
		cancel()
		if err != nil {
			failures++
		}
		held = append(held, jobs...)
		if s.h.Leftovers != nil {
			if left := s.h.Leftovers(t, c); len(left) > 0 {
				t.Fatalf("after claim %d (err %v) the claimer left %v", i, err, left)
			}
		}
		if s.h.HeldLocks != nil {
			if got := s.h.HeldLocks(t, c); !sameIDs(got, ids(held)) {
				t.Fatalf("after claim %d (err %v) it holds %d locks for %d jobs", i, err, len(got), len(held))
			}
		}
	}
	// Everything not returned to us is claimable by another claimer now,
	// not after a lease: a cut-off claim left no claim behind.
	got := s.drainAll(t, q, "cancel")
	if len(got)+len(held) != len(all) {
		t.Fatalf("%d held + %d claimable = %d, want %d (%d claims cut off)", len(held), len(got), len(held)+len(got), len(all), failures)
	}
	t.Logf("%d of 60 claims cut off by their context", failures)
	complete(t, c, held)
}
