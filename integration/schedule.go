package integration

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/schedule"
)

// tickCounts is schedule.Hooks that counts, across schedulers.
type tickCounts struct {
	mu       sync.Mutex
	enqueued int
	skipped  map[schedule.SkipReason]int
	failed   []error
}

func (c *tickCounts) TickEnqueued(string, time.Time, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.enqueued++
}

func (c *tickCounts) TicksSkipped(_ string, r schedule.SkipReason, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.skipped == nil {
		c.skipped = map[schedule.SkipReason]int{}
	}
	c.skipped[r] += n
}

func (c *tickCounts) TickFailed(_ string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failed = append(c.failed, err)
}

// runSchedulers runs n schedulers of sched on q for d, in parallel, and
// returns when all have stopped.
func runSchedulers(t *testing.T, q *queue.Queue, sched schedule.Schedule, h *tickCounts, n int, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctxFor(t), d)
	defer cancel()
	var wg sync.WaitGroup
	for range n {
		sc, err := schedule.New(q, []schedule.Schedule{sched}, schedule.Config{Hooks: h})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := sc.Run(ctx); err != nil {
				t.Errorf("scheduler: %v", err)
			}
		})
	}
	wg.Wait()
}

// scheduledTicks returns the run_at of the jobs of queue name, which the
// scheduler sets to the tick, in order.
func scheduledTicks(t *testing.T, q *queue.Queue, name string) []time.Time {
	t.Helper()
	jobs, err := q.Jobs(ctxFor(t), queue.JobFilter{Queue: name, Limit: queue.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for _, j := range jobs {
		if j.DedupeKey != schedule.DedupeKey(j.Queue, j.RunAt) {
			t.Errorf("job %d: dedupe key %q for tick %v", j.ID, j.DedupeKey, j.RunAt)
		}
		out = append(out, j.RunAt.UTC())
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// consecutive fails unless ticks are one second apart: none twice, none
// missing.
func consecutive(t *testing.T, ticks []time.Time) {
	t.Helper()
	for i := 1; i < len(ticks); i++ {
		if d := ticks[i].Sub(ticks[i-1]); d != time.Second {
			t.Fatalf("ticks %v and %v are %v apart (all: %v)", ticks[i-1], ticks[i], d, ticks)
		}
	}
}

// testSchedules: three schedulers of one @every 1s schedule make exactly
// the ticks that elapsed, each once; a scheduler stopped for 6 s and
// restarted makes only the latest missed tick (the default policy), on a
// fake clock.
func testSchedules(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	t.Run("ThreeSchedulersOneJobPerTick", func(t *testing.T) {
		t.Parallel()
		h := &tickCounts{}
		// The schedule's jobs go to a queue of its name, so that the
		// dedupe key check above can rebuild the key.
		sched := schedule.Schedule{Name: "every1s", Spec: "@every 1s", Queue: "every1s"}
		start := time.Now()
		runSchedulers(t, q, sched, h, 3, 10*time.Second)
		stop := time.Now()
		ticks := scheduledTicks(t, q, "every1s")
		t.Logf("%d ticks from %v to %v; enqueued %d, skipped %v, failed %d",
			len(ticks), ticks[0].Format(time.TimeOnly), ticks[len(ticks)-1].Format(time.TimeOnly), h.enqueued, h.skipped, len(h.failed))
		consecutive(t, ticks)
		if first, want := ticks[0], start.Truncate(time.Second).Add(time.Second); first.After(want.Add(time.Second)) {
			t.Errorf("first tick %v, want by %v (started %v)", first, want, start)
		}
		if last := ticks[len(ticks)-1]; last.Before(stop.Truncate(time.Second).Add(-time.Second)) {
			t.Errorf("last tick %v, stopped at %v", last, stop)
		}
		if h.enqueued != len(ticks) || h.skipped[schedule.SkipDuplicate] != 0 {
			t.Errorf("%d jobs stored, hooks saw %d enqueued and %d duplicates", len(ticks), h.enqueued, h.skipped[schedule.SkipDuplicate])
		}
		infos, err := q.Schedules(ctxFor(t))
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(infos, func(s queue.ScheduleInfo) bool { return s.Name == "every1s" })
		if i < 0 || !infos[i].LastTick.Equal(ticks[len(ticks)-1]) || infos[i].Spec != "@every 1s" || infos[i].TimeZone != "UTC" {
			t.Errorf("stored schedules %+v; last tick %v", infos, ticks[len(ticks)-1])
		}
	})
	t.Run("RestartMakesOnlyTheLatestMissedTick", func(t *testing.T) {
		t.Parallel()
		// On a clock of its own: a scheduler steps through 3 s, stops,
		// and a new one starts 6 s later, with nothing slept.
		h := &tickCounts{}
		clk := &fakeClock{}
		sched := schedule.Schedule{Name: "restart", Spec: "@every 1s", Queue: "restart"}
		newScheduler := func() *schedule.Scheduler {
			sc, err := schedule.New(q, []schedule.Schedule{sched}, schedule.Config{Clock: clk, Hooks: h})
			if err != nil {
				t.Fatal(err)
			}
			return sc
		}
		first := newScheduler()
		for ms := 100; ms <= 3100; ms += 250 {
			stepAt(t, clk, fakeDay.Add(time.Duration(ms)*time.Millisecond), first)
		}
		before := scheduledTicks(t, q, "restart")
		if len(before) == 0 {
			t.Fatal("no tick in 3 s")
		}
		restart := fakeDay.Add(9500 * time.Millisecond)
		second := newScheduler()
		for ms := 9500; ms <= 11100; ms += 250 {
			stepAt(t, clk, fakeDay.Add(time.Duration(ms)*time.Millisecond), second)
		}
		all := scheduledTicks(t, q, "restart")
		after := all[len(before):]
		lastBefore := before[len(before)-1]
		t.Logf("ticks before the stop %v, after the restart at %v: %v; skipped %v",
			len(before), restart.Format(time.TimeOnly+".000"), after, h.skipped)
		if len(after) == 0 {
			t.Fatal("no tick after the restart")
		}
		if latest, want := after[0], restart.Truncate(time.Second); !latest.Equal(want) {
			t.Errorf("first tick after restart %v, want the latest missed one, %v", latest, want)
		}
		missed := int(after[0].Sub(lastBefore)/time.Second) - 1
		if missed != 5 || h.skipped[schedule.SkipMissed] != missed {
			t.Errorf("%d ticks passed over between %v and %v (want 5), hooks counted %d", missed, lastBefore, after[0], h.skipped[schedule.SkipMissed])
		}
		consecutive(t, before)
		consecutive(t, after)
	})
}
