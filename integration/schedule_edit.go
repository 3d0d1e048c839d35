package integration

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/schedule"
)

// fakeClock is a schedule.Clock that moves only when set; Step is driven by
// hand, so After is never waited on.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func (c *fakeClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }

// fakeDay is the day the fake clocks start on: in the past, so the jobs
// the ticks make (run_at = the tick) can be claimed on the database clock.
var fakeDay = time.Date(2025, 6, 2, 0, 0, 0, 0, time.UTC)

// scheduler returns a Scheduler of one schedule on clk; its first Step
// stores the schedule.
func scheduler(t *testing.T, q *queue.Queue, clk *fakeClock, s schedule.Schedule) *schedule.Scheduler {
	t.Helper()
	sc, err := schedule.New(q, []schedule.Schedule{s}, schedule.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// stepAt sets clk to at and steps each scheduler once, in order.
func stepAt(t *testing.T, clk *fakeClock, at time.Time, scs ...*schedule.Scheduler) {
	t.Helper()
	clk.set(at)
	for _, sc := range scs {
		if err := sc.Step(ctxFor(t)); err != nil {
			t.Fatalf("Step at %v: %v", at, err)
		}
	}
}

// crontabLine parses one crontab line.
func crontabLine(t *testing.T, line string) schedule.Schedule {
	t.Helper()
	s, err := schedule.ParseCrontab(strings.NewReader(line))
	if err != nil || len(s) != 1 {
		t.Fatalf("%q: %v, %v", line, s, err)
	}
	return s[0]
}

// drainTicks claims and completes every ready job of queue name and adds
// each to seen by its dedupe key. Completed jobs free their dedupe key, so
// a tick enqueued twice shows here as a count of 2, not as a job the
// dedupe key turned away.
func drainTicks(t *testing.T, q *queue.Queue, name string, seen map[string][]*queue.Job) {
	t.Helper()
	c, err := q.NewClaimer(ctxFor(t))
	if err != nil {
		t.Fatalf("NewClaimer: %v", err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	for {
		jobs := claim(t, c, name, 100)
		if len(jobs) == 0 {
			return
		}
		for _, j := range jobs {
			seen[j.DedupeKey] = append(seen[j.DedupeKey], j)
		}
		complete(t, c, jobs)
	}
}

func storedSchedule(t *testing.T, q *queue.Queue, name string) (queue.ScheduleInfo, bool) {
	t.Helper()
	all, err := q.Schedules(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(all, func(s queue.ScheduleInfo) bool { return s.Name == name })
	if i < 0 {
		return queue.ScheduleInfo{}, false
	}
	return all[i], true
}

// testScheduleEdits: a schedule is its name, whatever definition runs it
// (issue #34). Each case drives two or three schedulers on fake clocks.
func testScheduleEdits(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	t.Run("ChangedSpecFiresNothingTheOldSpecOwed", func(t *testing.T) { testSpecChange(t, q) })
	t.Run("OldAndNewDefinitionsMakeOneJobPerTick", func(t *testing.T) { testRollingDeploy(t, q) })
	t.Run("PauseSurvivesAnEdit", func(t *testing.T) { testPauseSurvivesEdit(t, q) })
	t.Run("DeleteRemovesASchedule", func(t *testing.T) { testDeleteSchedule(t, q) })
	// A prune removes every unseen schedule of its tables: tables of its own.
	t.Run("UnseenSchedulesAreStaleAndPruned", func(t *testing.T) { testStalePrune(t, s.queue(t, queue.Config{})) })
}

// "0 3 * * *" fires at 03:00; at 10:00 a deploy changes the name's spec to
// "0 4 * * *": neither the scheduler that stores the change nor one that
// starts after it enqueues today's 04:00; tomorrow's 04:00 is enqueued once.
func testSpecChange(t *testing.T, q *queue.Queue) {
	t.Parallel()
	clk := &fakeClock{}
	seen := map[string][]*queue.Job{}
	old := scheduler(t, q, clk, crontabLine(t, `name=report kind=report.daily 0 3 * * * spec-change {"v":1}`))
	stepAt(t, clk, fakeDay.Add(2*time.Hour+59*time.Minute), old)
	stepAt(t, clk, fakeDay.Add(3*time.Hour+time.Second), old)
	drainTicks(t, q, "spec-change", seen)
	if len(seen) != 1 {
		t.Fatalf("after 03:00: jobs %v, want the 03:00 tick's", seen)
	}
	changed := fakeDay.Add(10 * time.Hour)
	newer := scheduler(t, q, clk, crontabLine(t, `name=report kind=report.daily 0 4 * * * spec-change {"v":2}`))
	stepAt(t, clk, changed, newer)
	// A second new scheduler starts after the change: the row it reads
	// already holds the new spec, and still it owes nothing today.
	later := scheduler(t, q, clk, crontabLine(t, `name=report kind=report.daily 0 4 * * * spec-change {"v":2}`))
	stepAt(t, clk, changed.Add(5*time.Minute), later, newer)
	drainTicks(t, q, "spec-change", seen)
	if len(seen) != 1 {
		t.Fatalf("after the change to 0 4 * * * at 10:00: jobs %v, want only the 03:00 tick's", slices.Sorted(mapsKeys(seen)))
	}
	if info, _ := storedSchedule(t, q, "report"); info.Spec != "0 4 * * *" || !info.SpecSince.Equal(changed) || !info.LastTick.Equal(fakeDay.Add(3*time.Hour)) {
		t.Errorf("stored %+v; want spec 0 4 * * *, spec_since %v, last tick 03:00", info, changed)
	}
	tomorrow := fakeDay.Add(24*time.Hour + 4*time.Hour)
	stepAt(t, clk, tomorrow.Add(time.Second), newer, later)
	drainTicks(t, q, "spec-change", seen)
	want := []string{schedule.DedupeKey("report", fakeDay.Add(3*time.Hour)), schedule.DedupeKey("report", tomorrow)}
	if got := slices.Sorted(mapsKeys(seen)); !slices.Equal(got, want) || len(seen[want[1]]) != 1 {
		t.Errorf("ticks %v (%d jobs of the last), want %v once each", got, len(seen[want[1]]), want)
	}
	// The lines' kind= is the jobs' kind, so a Worker can route them.
	for key, jobs := range seen {
		if jobs[0].Kind != "report.daily" || string(jobs[0].Payload) == "" {
			t.Errorf("job of %s: kind %q, payload %q; want kind report.daily", key, jobs[0].Kind, jobs[0].Payload)
		}
	}
}

// Two schedulers run the same name at once, an old definition ("@every 2s",
// one payload) and a new one ("@every 1s", the payload respaced, a kind),
// stepping in turns for 20 s of fake time: every tick makes one job.
func testRollingDeploy(t *testing.T, q *queue.Queue) {
	t.Parallel()
	clk := &fakeClock{}
	oldLine, newLine := crontabLine(t, `@every 2s deploy {"v":1}`), crontabLine(t, `@every 1s  deploy  {"v": 1}`)
	if oldLine.Name != newLine.Name {
		t.Fatalf("the edited line is schedule %s, the old one %s", newLine.Name, oldLine.Name)
	}
	old, newer := scheduler(t, q, clk, oldLine), scheduler(t, q, clk, newLine)
	start := fakeDay.Add(12 * time.Hour)
	stepAt(t, clk, start, old, newer)
	seen := map[string][]*queue.Job{}
	for i := 1; i <= 80; i++ {
		scs := []*schedule.Scheduler{old, newer}
		if i%2 == 1 {
			scs[0], scs[1] = newer, old
		}
		// Each scheduler's jobs are completed before the other steps, so
		// that a tick enqueued twice is not hidden by its dedupe key.
		for _, sc := range scs {
			stepAt(t, clk, start.Add(time.Duration(i)*250*time.Millisecond), sc)
			drainTicks(t, q, "deploy", seen)
		}
	}
	var ticks []time.Time
	for key, jobs := range seen {
		if len(jobs) != 1 {
			t.Errorf("tick %s made %d jobs", key, len(jobs))
		}
		ticks = append(ticks, jobs[0].RunAt.UTC())
	}
	slices.SortFunc(ticks, func(a, b time.Time) int { return a.Compare(b) })
	if len(ticks) != 20 || !ticks[0].Equal(start.Add(time.Second)) {
		t.Errorf("%d ticks from %v, want 20 from %v", len(ticks), ticks, start.Add(time.Second))
	}
	consecutive(t, ticks)
}

// A paused schedule stays paused when a scheduler with an edited
// definition (another spec and payload) takes it over, and its ticks make
// no job until it is resumed.
func testPauseSurvivesEdit(t *testing.T, q *queue.Queue) {
	t.Parallel()
	ctx := ctxFor(t)
	clk := &fakeClock{}
	start := fakeDay.Add(14 * time.Hour)
	before := scheduler(t, q, clk, crontabLine(t, `@every 1s paused-edit {"v":1}`))
	stepAt(t, clk, start, before)
	if err := q.PauseSchedule(ctx, "paused-edit"); err != nil {
		t.Fatal(err)
	}
	after := scheduler(t, q, clk, crontabLine(t, `@every 2s   paused-edit {"v":2}`))
	stepAt(t, clk, start.Add(time.Second), after)
	if info, _ := storedSchedule(t, q, "paused-edit"); !info.Paused || info.Spec != "@every 2s" {
		t.Fatalf("after the edit: %+v, want paused with spec @every 2s", info)
	}
	seen := map[string][]*queue.Job{}
	for i := 2; i <= 6; i++ {
		stepAt(t, clk, start.Add(time.Duration(i)*time.Second), after, before)
	}
	drainTicks(t, q, "paused-edit", seen)
	if len(seen) != 0 {
		t.Fatalf("a paused schedule made jobs %v", slices.Sorted(mapsKeys(seen)))
	}
	if err := q.ResumeSchedule(ctx, "paused-edit"); err != nil {
		t.Fatal(err)
	}
	stepAt(t, clk, start.Add(8*time.Second), after, before)
	drainTicks(t, q, "paused-edit", seen)
	if len(seen) != 1 {
		t.Errorf("resumed: jobs %v, want the 8 s tick's", slices.Sorted(mapsKeys(seen)))
	}
}

// DeleteSchedule removes the row; a second delete, or one of a name never
// stored, is ErrScheduleNotFound; a scheduler that still runs the schedule
// stores it again when it next refreshes (SeenInterval).
func testDeleteSchedule(t *testing.T, q *queue.Queue) {
	t.Parallel()
	ctx := ctxFor(t)
	clk := &fakeClock{}
	start := fakeDay.Add(16 * time.Hour)
	a := scheduler(t, q, clk, schedule.Schedule{Name: "to-delete", Spec: "@hourly", Queue: "to-delete"})
	b := scheduler(t, q, clk, schedule.Schedule{Name: "to-delete", Spec: "@hourly", Queue: "to-delete"})
	stepAt(t, clk, start, a, b)
	if _, ok := storedSchedule(t, q, "to-delete"); !ok {
		t.Fatal("not stored")
	}
	if err := q.DeleteSchedule(ctx, "to-delete"); err != nil {
		t.Fatal(err)
	}
	if _, ok := storedSchedule(t, q, "to-delete"); ok {
		t.Fatal("still stored after DeleteSchedule")
	}
	wantErr(t, "second delete", q.DeleteSchedule(ctx, "to-delete"), queue.ErrScheduleNotFound)
	wantErr(t, "delete of a bad name", q.DeleteSchedule(ctx, "bad name"), queue.ErrInvalidJob)
	stepAt(t, clk, start.Add(schedule.SeenInterval-time.Second), a, b)
	if _, ok := storedSchedule(t, q, "to-delete"); ok {
		t.Fatal("stored again before SeenInterval")
	}
	stepAt(t, clk, start.Add(schedule.SeenInterval), a, b)
	if info, ok := storedSchedule(t, q, "to-delete"); !ok || !info.SeenAt.Equal(start.Add(schedule.SeenInterval)) {
		t.Fatalf("a running scheduler did not store its schedule again: %+v, %v", info, ok)
	}
}

// Two schedulers store a schedule each; only one keeps running. Two hours
// on, the other's schedule is stale and pruned, the running one's is
// neither; a prune that races a refresh leaves the refreshed row.
func testStalePrune(t *testing.T, q *queue.Queue) {
	t.Parallel()
	ctx := ctxFor(t)
	clk := &fakeClock{}
	start := fakeDay.Add(18 * time.Hour)
	running := scheduler(t, q, clk, schedule.Schedule{Name: "prune-kept", Spec: "@hourly", Queue: "prune"})
	gone := scheduler(t, q, clk, schedule.Schedule{Name: "prune-gone", Spec: "@hourly", Queue: "prune"})
	stepAt(t, clk, start, running, gone)
	for at := start; !at.After(start.Add(2 * time.Hour)); at = at.Add(schedule.SeenInterval) {
		stepAt(t, clk, at, running)
	}
	now := start.Add(2 * time.Hour)
	kept, _ := storedSchedule(t, q, "prune-kept")
	old, _ := storedSchedule(t, q, "prune-gone")
	if schedule.Stale(kept, now) || !schedule.Stale(old, now) || !old.SeenAt.Equal(start) {
		t.Fatalf("at %v: kept %+v stale %v, gone %+v stale %v", now, kept, schedule.Stale(kept, now), old, schedule.Stale(old, now))
	}
	st := q.Driver()
	wantErr(t, "delete of a row seen since", st.DeleteSchedule(ctx, "prune-kept", start), queue.ErrScheduleNotFound)
	pruned, err := q.PruneSchedules(ctx, now.Add(-schedule.StaleAfter))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pruned, []string{"prune-gone"}) {
		t.Errorf("pruned %v, want [prune-gone]", pruned)
	}
	if _, ok := storedSchedule(t, q, "prune-kept"); !ok {
		t.Error("the running scheduler's schedule was pruned")
	}
	if _, ok := storedSchedule(t, q, "prune-gone"); ok {
		t.Error("the stale schedule is still stored")
	}
	if _, err := q.PruneSchedules(ctx, time.Time{}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("prune without a time: %v", err)
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
