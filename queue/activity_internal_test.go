package queue

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeActivityStore records what an Activity writes.
type fakeActivityStore struct {
	Driver
	mu     sync.Mutex
	adds   [][]ActivityCount
	procs  []ProcessInfo
	pruned []ActivityPrune
	fail   error
}

func (f *fakeActivityStore) AddActivity(_ context.Context, cs []ActivityCount) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.adds = append(f.adds, append([]ActivityCount(nil), cs...))
	return nil
}
func (f *fakeActivityStore) Activity(context.Context, time.Time) ([]ActivityCount, error) {
	return nil, nil
}
func (f *fakeActivityStore) TouchProcess(_ context.Context, p ProcessInfo) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.procs = append(f.procs, p)
	return nil
}
func (f *fakeActivityStore) RemoveProcess(context.Context, string) error      { return nil }
func (f *fakeActivityStore) Processes(context.Context) ([]ProcessInfo, error) { return nil, nil }
func (f *fakeActivityStore) PruneActivity(_ context.Context, p ActivityPrune) (int64, error) {
	f.pruned = append(f.pruned, p)
	return 0, nil
}

func newTestActivity(t testing.TB, f *fakeActivityStore) *Activity {
	t.Helper()
	a, err := NewActivity(&Queue{drv: f, cfg: Config{}.WithDefaults()}, ActivityConfig{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// A flush writes one row per (queue, kind) with what was counted since
// the last, under the current minute; counts a failed flush could not
// write come back in the next one; past MaxActivityKinds kinds a queue's
// jobs count as "other".
func TestActivityFlush(t *testing.T) {
	f := &fakeActivityStore{}
	a := newTestActivity(t, f)
	wa := &workerActivity{a: a, queue: "q", kinds: map[string]*activityCounts{}}
	for _, o := range []Outcome{OutcomeCompleted, OutcomeCompleted, OutcomeRetried, OutcomeDead, OutcomeSnoozed, OutcomeReleased} {
		wa.count("", o)
	}
	wa.count("k", OutcomeCompleted)
	ctx := context.Background()
	if err := a.Flush(ctx, true); err != nil {
		t.Fatal(err)
	}
	if len(f.adds) != 1 || len(f.adds[0]) != 2 {
		t.Fatalf("adds %+v, want one batch of two rows", f.adds)
	}
	byKind := map[string]ActivityCount{}
	for _, c := range f.adds[0] {
		if c.Process != a.ID() || c.Queue != "q" || c.Minute.Second() != 0 || c.Minute.Nanosecond() != 0 {
			t.Errorf("row %+v", c)
		}
		byKind[c.Kind] = c
	}
	if c := byKind[""]; c.Completed != 2 || c.Retried != 1 || c.Dead != 1 {
		t.Errorf(`kind "": %+v`, c)
	}
	if c := byKind["k"]; c.Completed != 1 || c.Retried != 0 || c.Dead != 0 {
		t.Errorf(`kind "k": %+v`, c)
	}
	if len(f.pruned) != 1 || f.pruned[0].Limit != pruneLimit || len(f.procs) != 1 || f.procs[0].ID != a.ID() {
		t.Errorf("pruned %+v, touched %+v", f.pruned, f.procs)
	}

	// Nothing counted: no write but the heartbeat.
	if err := a.Flush(ctx, false); err != nil || len(f.adds) != 1 || len(f.procs) != 2 {
		t.Fatalf("idle flush: %v, %d adds, %d touches", err, len(f.adds), len(f.procs))
	}

	// A failed write keeps its counts for the next flush.
	wa.count("", OutcomeCompleted)
	f.fail = context.DeadlineExceeded
	if err := a.Flush(ctx, false); err == nil {
		t.Fatal("failed write not reported")
	}
	f.fail = nil
	wa.count("", OutcomeCompleted)
	if err := a.Flush(ctx, false); err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, c := range f.adds[len(f.adds)-1] {
		sum += c.Completed
	}
	if sum != 2 {
		t.Errorf("after a failed flush, %d completed written, want 2: %+v", sum, f.adds[len(f.adds)-1])
	}

	for i := range MaxActivityKinds + 5 {
		wa.count(strings.Repeat("x", i+1), OutcomeCompleted)
	}
	before := len(f.adds)
	if err := a.Flush(ctx, false); err != nil {
		t.Fatal(err)
	}
	// More rows than a batch: two writes.
	if len(f.adds) != before+2 {
		t.Errorf("%d writes for %d rows", len(f.adds)-before, MaxActivityKinds-1)
	}
	var last []ActivityCount
	for _, batch := range f.adds[before:] {
		last = append(last, batch...)
	}
	var other int64
	for _, c := range last {
		if c.Kind == "other" {
			other = c.Completed
		}
	}
	// "", "k" and MaxActivityKinds-2 new kinds fill the bound.
	if len(last) != MaxActivityKinds-2+1 || other != 7 {
		t.Errorf("%d rows, %d counted as other; want %d rows and 7", len(last), other, MaxActivityKinds-1)
	}
}

// The process row lists the running Workers' queues and the sum of
// their concurrency.
func TestActivityProcessRow(t *testing.T) {
	a := newTestActivity(t, &fakeActivityStore{})
	w1 := &Worker{cfg: WorkerConfig{Queue: "b", Concurrency: 3}}
	w2 := &Worker{cfg: WorkerConfig{Queue: "a", Concurrency: 2}}
	w3 := &Worker{cfg: WorkerConfig{Queue: "b", Concurrency: 1}}
	leave1 := a.join(w1)
	a.join(w2)
	a.join(w3)
	p := a.process(time.Now())
	if strings.Join(p.Queues, ",") != "a,b" || p.Concurrency != 6 || p.Host != "h" {
		t.Errorf("process %+v", p)
	}
	leave1()
	if p := a.process(time.Now()); p.Concurrency != 3 {
		t.Errorf("after a Worker left: %+v", p)
	}
}

func TestJoinQueues(t *testing.T) {
	long := make([]string, 200)
	for i := range long {
		long[i] = "queue-name"
	}
	s := JoinQueues(long)
	if len(s) > MaxProcessQueuesLen || !strings.HasSuffix(s, ",…") || strings.Contains(s, ",queue-n,") {
		t.Errorf("JoinQueues of 200 names: %d bytes, %q…", len(s), s[:40])
	}
	if got := SplitQueues(JoinQueues([]string{"a", "b"})); strings.Join(got, "|") != "a|b" {
		t.Errorf("round trip: %q", got)
	}
	if got := cutString("aé", 2); got != "a" {
		t.Errorf("cutString cut a rune: %q", got)
	}
}

// Counting a job is a map lookup and an atomic add: no allocation.
func TestActivityCountAllocatesNothing(t *testing.T) {
	a := newTestActivity(t, &fakeActivityStore{})
	wa := &workerActivity{a: a, queue: "q", kinds: map[string]*activityCounts{}}
	wa.count("k", OutcomeCompleted)
	if n := testing.AllocsPerRun(1000, func() { wa.count("k", OutcomeCompleted) }); n != 0 {
		t.Errorf("%v allocations per job", n)
	}
}

// BenchmarkActivityCount is what the counters cost a Worker per job: the
// result writer's count of one settled job, by kind.
func BenchmarkActivityCount(b *testing.B) {
	a := newTestActivity(b, &fakeActivityStore{})
	wa := &workerActivity{a: a, queue: "q", kinds: map[string]*activityCounts{}}
	kinds := []string{"", "email", "report", "resize"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		wa.count(kinds[i&3], OutcomeCompleted)
	}
}

// BenchmarkActivityCountContended: the same with every core counting the
// same (queue, kind) — Workers of one queue in one process.
func BenchmarkActivityCountContended(b *testing.B) {
	a := newTestActivity(b, &fakeActivityStore{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		wa := &workerActivity{a: a, queue: "q", kinds: map[string]*activityCounts{}}
		for pb.Next() {
			wa.count("email", OutcomeCompleted)
		}
	})
}

// commitThenCancelStore writes what AddActivity is given, then, when the
// context it was given has ended meanwhile, reports that as its error: a
// database statement cancelled after its commit looks the same.
type commitThenCancelStore struct {
	*fakeActivityStore
	entered chan struct{} // receives when an AddActivity starts
	release chan struct{} // closed to let AddActivity go on
}

func (s *commitThenCancelStore) AddActivity(ctx context.Context, cs []ActivityCount) error {
	s.entered <- struct{}{}
	<-s.release
	if err := s.fakeActivityStore.AddActivity(ctx, cs); err != nil {
		return err
	}
	return ctx.Err()
}

// A Worker leaving kicks a flush; when Run's context ends while that
// flush writes, the counts are written once: the flush is not cut short
// (it was, and its "failed" counts were written again by the last flush:
// dbq work's activity counted each job twice at shutdown).
func TestActivityRunCountsOnceAtShutdown(t *testing.T) {
	s := &commitThenCancelStore{fakeActivityStore: &fakeActivityStore{},
		entered: make(chan struct{}, 10), release: make(chan struct{})}
	a, err := NewActivity(&Queue{drv: s, cfg: Config{}.WithDefaults()}, ActivityConfig{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	c := a.counter("q", "")
	c.completed.Add(4)
	c.dead.Add(1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	<-s.entered // the first flush is writing the counts
	cancel()
	close(s.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var sum ActivityCount
	for _, add := range s.adds {
		for _, c := range add {
			sum.Completed, sum.Dead = sum.Completed+c.Completed, sum.Dead+c.Dead
		}
	}
	if sum.Completed != 4 || sum.Dead != 1 {
		t.Errorf("written %d completed and %d dead over %d writes, want 4 and 1", sum.Completed, sum.Dead, len(s.adds))
	}
}
