package schedule

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// store is an in-memory schedules table and jobs table with the
// conditional advance the dialects implement.
type store struct {
	queue.Driver // nil: what the scheduler must not call panics
	mu           sync.Mutex
	rows         map[string]*queue.ScheduleInfo
	jobs         map[string]queue.NewJob // by dedupe key
	nextID       int64
}

func newStore() *store {
	return &store{rows: map[string]*queue.ScheduleInfo{}, jobs: map[string]queue.NewJob{}}
}

func (s *store) Dialect() string { return "fake" }
func (s *store) Enqueue(context.Context, any, []queue.NewJob) ([]int64, error) {
	return nil, errors.New("not here")
}
func (s *store) NewClaimer(context.Context) (queue.Claimer, error) { return nil, queue.ErrUnsupported }
func (s *store) Stats(context.Context) ([]queue.QueueStats, error) { return nil, nil }
func (s *store) Close() error                                      { return nil }

func (s *store) UpsertSchedule(_ context.Context, d queue.ScheduleDef) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows[d.Name]
	if r == nil {
		r = &queue.ScheduleInfo{Name: d.Name}
		s.rows[d.Name] = r
	}
	if r.Spec != d.Spec || r.TimeZone != d.TimeZone {
		r.SpecSince = d.At
	}
	r.Spec, r.TimeZone, r.Queue, r.NextTick, r.SeenAt = d.Spec, d.TimeZone, d.Queue, d.NextTick, d.At
	return nil
}

func (s *store) DeleteSchedule(_ context.Context, name string, seenBefore time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows[name]
	if r == nil || (!seenBefore.IsZero() && !r.SeenAt.Before(seenBefore)) {
		return queue.ErrScheduleNotFound
	}
	delete(s.rows, name)
	return nil
}

func (s *store) AdvanceSchedule(_ context.Context, t queue.Tick) (queue.TickResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows[t.Schedule]
	if r == nil || !(r.LastTick.IsZero() || r.LastTick.Before(t.At)) {
		return queue.TickResult{}, nil
	}
	r.LastTick, r.NextTick = t.At, t.Next
	if r.Paused {
		return queue.TickResult{Advanced: true, Paused: true}, nil
	}
	if _, ok := s.jobs[t.Job.DedupeKey]; ok {
		return queue.TickResult{Advanced: true, Existed: true}, nil
	}
	s.nextID++
	s.jobs[t.Job.DedupeKey] = t.Job
	return queue.TickResult{Advanced: true, JobID: s.nextID}, nil
}

func (s *store) Schedules(context.Context) ([]queue.ScheduleInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []queue.ScheduleInfo
	for _, r := range s.rows {
		out = append(out, *r)
	}
	return out, nil
}

func (s *store) SetSchedulePaused(_ context.Context, name string, paused bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rows[name]
	if r == nil {
		return queue.ErrScheduleNotFound
	}
	r.Paused = paused
	return nil
}

// ticksOf returns the run_at of every job stored, sorted.
func (s *store) ticksOf() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Time
	for _, j := range s.jobs {
		out = append(out, j.RunAt)
	}
	for i := range out {
		for k := i + 1; k < len(out); k++ {
			if out[k].Before(out[i]) {
				out[i], out[k] = out[k], out[i]
			}
		}
	}
	return out
}

// clock is a settable clock; Step is driven by hand, so After is never
// waited on.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}
func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}
func (c *clock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }

// counts is Hooks that counts.
type counts struct {
	mu       sync.Mutex
	enqueued int
	skipped  map[SkipReason]int
}

func (c *counts) TickEnqueued(string, time.Time, int64) { c.mu.Lock(); c.enqueued++; c.mu.Unlock() }
func (c *counts) TicksSkipped(_ string, r SkipReason, n int) {
	c.mu.Lock()
	if c.skipped == nil {
		c.skipped = map[SkipReason]int{}
	}
	c.skipped[r] += n
	c.mu.Unlock()
}
func (c *counts) TickFailed(string, error) {}

func newScheduler(t *testing.T, st *store, clk *clock, h Hooks, s Schedule) *Scheduler {
	t.Helper()
	q, err := queue.New(st, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := New(q, []Schedule{s}, Config{Clock: clk, Hooks: h})
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.register(context.Background()); err != nil {
		t.Fatal(err)
	}
	return sc
}

var t0 = time.Date(2025, 12, 31, 23, 59, 50, 250_000_000, time.UTC)

func every1s(missed Missed) Schedule {
	return Schedule{Name: "s", Spec: "@every 1s", Queue: "q", Missed: missed, MaxMissed: 3}
}

// Three schedulers stepping at once, at odd moments, for 10 s across the
// year's end: each elapsed tick is enqueued once, by one of them.
func TestThreeSchedulersOneJobPerTick(t *testing.T) {
	st, clk, h := newStore(), &clock{now: t0}, &counts{}
	var scs []*Scheduler
	for range 3 {
		scs = append(scs, newScheduler(t, st, clk, h, every1s(MissedLatest)))
	}
	for now := t0; now.Before(t0.Add(10 * time.Second)); now = now.Add(130 * time.Millisecond) {
		clk.set(now)
		var wg sync.WaitGroup
		for _, sc := range scs {
			wg.Go(func() {
				if err := sc.Step(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	got := st.ticksOf()
	if len(got) != 10 {
		t.Fatalf("%d jobs in 10 s: %v", len(got), got)
	}
	for i, tick := range got {
		if want := t0.Truncate(time.Second).Add(time.Duration(i+1) * time.Second); !tick.Equal(want) {
			t.Fatalf("job %d runs at %v, want %v", i, tick, want)
		}
	}
	if h.enqueued != 10 || h.skipped[SkipTaken] != 20 || h.skipped[SkipDuplicate] != 0 {
		t.Fatalf("enqueued %d, skipped %v", h.enqueued, h.skipped)
	}
}

// After 5 s down a scheduler enqueues the latest missed tick (default),
// none, or each up to the cap.
func TestMissedTicks(t *testing.T) {
	for _, c := range []struct {
		missed  Missed
		grace   time.Duration
		want    []time.Duration // after t0's second
		skipped map[SkipReason]int
	}{
		{MissedLatest, 0, []time.Duration{1, 7}, map[SkipReason]int{SkipMissed: 5}},
		{MissedNone, 500 * time.Millisecond, []time.Duration{1}, map[SkipReason]int{SkipMissed: 5, SkipLate: 1}},
		{MissedEach, 0, []time.Duration{1, 5, 6, 7}, map[SkipReason]int{SkipOverCap: 3}},
	} {
		t.Run(c.missed.String(), func(t *testing.T) {
			st, clk, h := newStore(), &clock{now: t0}, &counts{}
			sc := newScheduler(t, st, clk, h, every1s(c.missed))
			clk.set(t0.Add(time.Second))
			_ = sc.Step(context.Background())
			// Down from +1.0s to +7.9s: ticks +2..+7 pass.
			clk.set(t0.Add(7*time.Second + 650*time.Millisecond))
			sc = newScheduler(t, st, clk, h, every1s(c.missed))
			if c.grace > 0 {
				sc.cfg.Grace = c.grace
			}
			_ = sc.Step(context.Background())
			got := st.ticksOf()
			if len(got) != len(c.want) {
				t.Fatalf("jobs at %v, want +%v s", got, c.want)
			}
			for i, d := range c.want {
				if want := t0.Truncate(time.Second).Add(d * time.Second); !got[i].Equal(want) {
					t.Fatalf("job %d at %v, want %v", i, got[i], want)
				}
			}
			for r, n := range c.skipped {
				if h.skipped[r] != n {
					t.Errorf("skipped %v, want %v", h.skipped, c.skipped)
				}
			}
		})
	}
}

// A paused schedule's ticks are recorded without jobs; resumed, it does
// not make up for them.
func TestPausedTicksPass(t *testing.T) {
	st, clk, h := newStore(), &clock{now: t0}, &counts{}
	sc := newScheduler(t, st, clk, h, every1s(MissedLatest))
	if err := st.SetSchedulePaused(context.Background(), "s", true); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		clk.set(t0.Add(time.Duration(i) * time.Second))
		_ = sc.Step(context.Background())
	}
	_ = st.SetSchedulePaused(context.Background(), "s", false)
	clk.set(t0.Add(4 * time.Second))
	_ = sc.Step(context.Background())
	got := st.ticksOf()
	if len(got) != 1 || !got[0].Equal(t0.Truncate(time.Second).Add(4*time.Second)) || h.skipped[SkipPaused] != 3 {
		t.Fatalf("jobs %v, skipped %v", got, h.skipped)
	}
}

// The wait ends at the next tick.
func TestWaitsForTheNextTick(t *testing.T) {
	st, clk := newStore(), &clock{now: t0}
	sc := newScheduler(t, st, clk, nil, Schedule{Name: "m", Spec: "0 0 * * *", Queue: "q"})
	if got, want := sc.wait(), 9750*time.Millisecond; got != want {
		t.Fatalf("wait %v, want %v", got, want)
	}
	sc.cfg.MaxWait = time.Second
	if got := sc.wait(); got != time.Second {
		t.Fatalf("wait %v, want MaxWait", got)
	}
}

func TestNewRefusesBadSchedules(t *testing.T) {
	q, _ := queue.New(newStore(), queue.Config{})
	for _, s := range [][]Schedule{
		{{Name: "", Spec: "@hourly", Queue: "q"}},
		{{Name: "a", Spec: "@hourly", Queue: "bad queue"}},
		{{Name: "a", Spec: "@fortnightly", Queue: "q"}},
		{{Name: "a", Spec: "@hourly", Queue: "q"}, {Name: "a", Spec: "@daily", Queue: "q"}},
		{{Name: "a", Spec: "@hourly", Queue: "q", Missed: 7}},
		{{Name: "a", Spec: "@hourly", Queue: "q", MaxMissed: -1}},
		{{Name: "a", Spec: "@hourly", Queue: "q", Kind: "bad\nkind"}},
	} {
		if _, err := New(q, s, Config{}); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
}

// A schedule's kind is its jobs' kind.
func TestTicksCarryTheKind(t *testing.T) {
	st, clk, h := newStore(), &clock{now: t0}, &counts{}
	s := every1s(MissedLatest)
	s.Kind = "nightly_report"
	sc := newScheduler(t, st, clk, h, s)
	clk.set(t0.Add(1500 * time.Millisecond))
	if err := sc.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(st.jobs) != 1 {
		t.Fatalf("%d jobs, want 1", len(st.jobs))
	}
	for _, j := range st.jobs {
		if j.Kind != "nightly_report" {
			t.Errorf("the tick's job has kind %q", j.Kind)
		}
	}
}

// cancelling is a store whose AdvanceSchedule ends the scheduler's context
// while it writes, as a stop during a tick's commit does.
type cancelling struct {
	*store
	cancel context.CancelFunc
	ctxErr error
}

func (c *cancelling) AdvanceSchedule(ctx context.Context, t queue.Tick) (queue.TickResult, error) {
	c.cancel()
	c.ctxErr = ctx.Err()
	return c.store.AdvanceSchedule(ctx, t)
}

// A stop that comes while a tick is being written does not cut the write
// short: the tick that was stored is reported enqueued, not failed, and no
// later tick is begun.
func TestStopDuringTickWrite(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, clk, h := &cancelling{store: newStore(), cancel: cancel}, &clock{now: t0}, &counts{}
	q, err := queue.New(st, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := New(q, []Schedule{every1s(MissedEach)}, Config{Clock: clk, Hooks: h})
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.register(context.Background()); err != nil {
		t.Fatal(err)
	}
	clk.set(t0.Add(3 * time.Second)) // three ticks due
	err = sc.Step(ctx)
	if st.ctxErr != nil {
		t.Fatalf("the tick's write saw its context ended: %v", st.ctxErr)
	}
	if got := st.ticksOf(); len(got) != 1 || h.enqueued != 1 {
		t.Fatalf("%d jobs stored, %d reported enqueued (step: %v); want the one begun before the stop", len(got), h.enqueued, err)
	}
	if err != nil {
		t.Fatalf("step: %v; a stop is no failure", err)
	}
}
