package ui_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// CountQueues, which the Queues page reads, counts what Stats counts, each
// count cut at its limit, and the oldest ready wait exactly.
func TestCountQueuesAgreesWithStats(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		old := time.Now().Add(-time.Hour)
		e.enqueue(t,
			queue.NewJob{Queue: "a", Priority: 5}, queue.NewJob{Queue: "a", Priority: 1},
			queue.NewJob{Queue: "a", Priority: 9, RunAt: old}, queue.NewJob{Queue: "a", Priority: 1},
			queue.NewJob{Queue: "a", Priority: 1, Delay: time.Hour}, queue.NewJob{Queue: "a", Priority: 9, Delay: time.Hour},
			queue.NewJob{Queue: "a", Delay: 2 * time.Hour})
		ids := e.enqueue(t, queue.NewJob{Queue: "b"}, queue.NewJob{Queue: "b"}, queue.NewJob{Queue: "b"})
		e.kill(t, "b", ids[0], "x")
		e.kill(t, "b", ids[1], "x")
		c, err := e.q.NewClaimer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if jobs, err := c.Claim(ctx, "b", 1); err != nil || len(jobs) != 1 {
			t.Fatalf("claim of b: %v, %v", jobs, err)
		}
		e.enqueue(t, queue.NewJob{Queue: "c", Delay: time.Hour})
		if err := e.q.Pause(ctx, "c"); err != nil {
			t.Fatal(err)
		}

		st, err := e.q.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int64{1000, 2, 1} {
			got, err := e.q.CountQueues(ctx, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(st) {
				t.Fatalf("CountQueues(%d) = %+v, Stats %+v", limit, got, st)
			}
			for i, s := range st {
				g := got[i]
				want := s
				want.Ready, want.Scheduled, want.Held, want.Dead = min(s.Ready, limit), min(s.Scheduled, limit),
					min(s.Held, limit), min(s.Dead, limit)
				want.OldestReadyAge, g.OldestReadyAge = 0, 0
				if g != want {
					t.Errorf("CountQueues(%d) of %s: %+v, want %+v", limit, s.Queue, g, want)
				}
				if d := math.Abs(got[i].OldestReadyAge - s.OldestReadyAge); d > 30 {
					t.Errorf("CountQueues(%d) of %s: oldest ready %.1fs, Stats %.1fs", limit, s.Queue,
						got[i].OldestReadyAge, s.OldestReadyAge)
				}
			}
		}
		if st[0].Queue != "a" || st[0].OldestReadyAge < 3500 {
			t.Errorf("Stats: %+v, want queue a with its oldest ready an hour old", st[0])
		}
		if _, err := e.q.CountQueues(ctx, 0); !errors.Is(err, queue.ErrInvalidLimit) {
			t.Errorf("CountQueues(0): %v, want ErrInvalidLimit", err)
		}
	})
}

// JobFilter.DedupeKey finds the one job of a queue with that key, and the
// other filters apply to it.
func TestJobsByDedupeKey(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		ctx := ctxT(t)
		ids := e.enqueue(t, queue.NewJob{Queue: "a", DedupeKey: "k1", Kind: "mail"},
			queue.NewJob{Queue: "b", DedupeKey: "k1"}, queue.NewJob{Queue: "a", DedupeKey: "k2"}, queue.NewJob{Queue: "a"})
		e.kill(t, "a", ids[2], "x")
		for _, c := range []struct {
			f    queue.JobFilter
			want int64 // 0: none
		}{
			{queue.JobFilter{Queue: "a", DedupeKey: "k1"}, ids[0]},
			{queue.JobFilter{Queue: "b", DedupeKey: "k1"}, ids[1]},
			{queue.JobFilter{Queue: "a", DedupeKey: "k2"}, ids[2]},
			{queue.JobFilter{Queue: "a", DedupeKey: "k2", State: queue.StateDead}, ids[2]},
			{queue.JobFilter{Queue: "a", DedupeKey: "k2", State: queue.StateReady}, 0},
			{queue.JobFilter{Queue: "a", DedupeKey: "k1", Kind: "mail"}, ids[0]},
			{queue.JobFilter{Queue: "a", DedupeKey: "k1", Kind: "sms"}, 0},
			{queue.JobFilter{Queue: "a", DedupeKey: "k1", AfterID: ids[0]}, 0},
			{queue.JobFilter{Queue: "b", DedupeKey: "k2"}, 0},
			{queue.JobFilter{Queue: "a", DedupeKey: "nope"}, 0},
		} {
			jobs, err := e.q.Jobs(ctx, c.f)
			if err != nil {
				t.Fatalf("%+v: %v", c.f, err)
			}
			switch {
			case c.want == 0 && len(jobs) != 0:
				t.Errorf("%+v: job %d, want none", c.f, jobs[0].ID)
			case c.want != 0 && (len(jobs) != 1 || jobs[0].ID != c.want):
				t.Errorf("%+v: %v, want job %d", c.f, jobs, c.want)
			}
		}
		if _, err := e.q.Jobs(ctx, queue.JobFilter{DedupeKey: "k1"}); !errors.Is(err, queue.ErrInvalidJob) {
			t.Errorf("DedupeKey without Queue: %v, want ErrInvalidJob", err)
		}
	})
}
