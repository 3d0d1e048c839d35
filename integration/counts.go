package integration

import (
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// CountQueuesStopsAtLimitAcrossPriorities: CountQueues counts what Stats
// counts, each count cut at its limit (the sum over a queue's priorities
// too), for a queue whose due and future jobs are spread over priorities
// — one with future jobs only — and with jobs held and dead; another
// queue's jobs are not counted. The oldest ready wait is the oldest due
// job's, whatever its priority.
func testCountQueuesAcrossPriorities(t *testing.T, s *suite) {
	ctx := ctxFor(t)
	q := s.queue(t, queue.Config{})
	var jobs []queue.NewJob
	add := func(priority int16, due, future int) {
		for range due {
			jobs = append(jobs, queue.NewJob{Queue: "many", Priority: priority})
		}
		for range future {
			jobs = append(jobs, queue.NewJob{Queue: "many", Priority: priority, Delay: time.Hour})
		}
	}
	add(-2, 25, 0)
	add(0, 25, 2)
	add(3, 25, 1)
	add(5, 24, 0)
	add(9, 0, 20)
	jobs = append(jobs, queue.NewJob{Queue: "many", Priority: 5, RunAt: time.Now().Add(-time.Hour)},
		queue.NewJob{Queue: "other", Priority: 1}, queue.NewJob{Queue: "other", Priority: 1, Delay: time.Hour})
	enqueue(t, q, jobs...)
	c := s.claimer(t, q)
	claimed := claim(t, c, "many", 5)
	if len(claimed) != 5 {
		t.Fatalf("claimed %d jobs of many, want 5", len(claimed))
	}
	kill := []queue.RetryParams{{Lease: claimed[0].Lease(), Dead: true}, {Lease: claimed[1].Lease(), Dead: true}}
	if err := c.Retry(ctx, kill); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	// many: 100 due jobs over four priorities, 5 of them claimed (2 made
	// dead, 3 held); 23 future jobs over three.
	wantCounts(t, q, "many", 95, 23, 3, 2)
	wantCounts(t, q, "other", 1, 1, 0, 0)
	for _, limit := range []int64{1000, 96, 95, 94, 24, 23, 22, 3, 2, 1} {
		got, err := q.CountQueues(ctx, limit)
		if err != nil {
			t.Fatalf("CountQueues(%d): %v", limit, err)
		}
		if len(got) != 2 || got[0].Queue != "many" || got[1].Queue != "other" {
			t.Fatalf("CountQueues(%d) = %+v, want queues many and other", limit, got)
		}
		for _, w := range []queue.QueueStats{
			{Queue: "many", Ready: min(95, limit), Scheduled: min(23, limit), Held: min(3, limit), Dead: min(2, limit)},
			{Queue: "other", Ready: 1, Scheduled: 1},
		} {
			g := got[0]
			if w.Queue == "other" {
				g = got[1]
			}
			age := g.OldestReadyAge
			g.OldestReadyAge = 0
			if g != w {
				t.Errorf("CountQueues(%d) of %s: %+v, want %+v", limit, w.Queue, g, w)
			}
			if w.Queue == "many" && (age < 3500 || age > 3700) {
				t.Errorf("CountQueues(%d) of many: oldest ready %.1fs, want about 3600s", limit, age)
			}
		}
	}
}
