package integration

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// activityStore returns q's driver as a queue.ActivityStore, which every
// shipped dialect implements.
func activityStore(t *testing.T, q *queue.Queue) queue.ActivityStore {
	t.Helper()
	return q.Driver()
}

// ActivityOfProcessesIsSummed: counts two processes wrote for the same
// queue and minute are both kept (each in its own row) and summed on
// read; a second write of a row adds to it.
func testActivitySummed(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	st, ctx := activityStore(t, q), ctxFor(t)
	m := time.Now().UTC().Truncate(time.Minute)
	add := func(cs ...queue.ActivityCount) {
		t.Helper()
		if err := st.AddActivity(ctx, cs); err != nil {
			t.Fatalf("AddActivity: %v", err)
		}
	}
	add(queue.ActivityCount{Process: "p1", Queue: "a", Minute: m, Completed: 1, Retried: 2, Dead: 3},
		queue.ActivityCount{Process: "p1", Queue: "a", Kind: "émail", Minute: m, Completed: 100},
		queue.ActivityCount{Process: "p1", Queue: "a", Minute: m.Add(-time.Minute), Completed: 7},
		queue.ActivityCount{Process: "p1", Queue: "b", Minute: m, Dead: 1},
		queue.ActivityCount{Process: "p1", Queue: "a", Minute: m.Add(-2 * time.Hour), Completed: 1000})
	add(queue.ActivityCount{Process: "p2", Queue: "a", Minute: m, Completed: 10, Retried: 20, Dead: 30})
	add(queue.ActivityCount{Process: "p1", Queue: "a", Minute: m, Completed: 5})
	got, err := q.Activity(ctx, m.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	want := []queue.ActivityCount{
		{Queue: "a", Minute: m.Add(-time.Minute), Completed: 7},
		{Queue: "a", Minute: m, Completed: 116, Retried: 22, Dead: 33},
		{Queue: "b", Minute: m, Dead: 1},
	}
	if !slices.EqualFunc(got, want, sameCount) {
		t.Fatalf("Activity:\n got %+v\nwant %+v", got, want)
	}
}

func sameCount(a, b queue.ActivityCount) bool {
	return a.Queue == b.Queue && a.Kind == b.Kind && a.Process == b.Process && a.Minute.Equal(b.Minute) &&
		a.Completed == b.Completed && a.Retried == b.Retried && a.Dead == b.Dead
}

// ActivityPrunesOldestInBatches: PruneActivity deletes at most Limit rows
// older than Before, and the processes not seen since.
func testActivityPrune(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	st, ctx := activityStore(t, q), ctxFor(t)
	m := time.Now().UTC().Truncate(time.Minute)
	var cs []queue.ActivityCount
	for _, age := range []time.Duration{3 * time.Hour, 2 * time.Hour, 2 * time.Hour, 0} {
		cs = append(cs, queue.ActivityCount{Process: "p" + age.String() + string(rune('a'+len(cs))), Queue: "a",
			Minute: m.Add(-age), Completed: 1})
	}
	if err := st.AddActivity(ctx, cs); err != nil {
		t.Fatal(err)
	}
	old, fresh := queue.ProcessInfo{ID: "old", Host: "h", PID: 1, StartedAt: m.Add(-time.Hour), SeenAt: m.Add(-time.Hour)},
		queue.ProcessInfo{ID: "fresh", Host: "h", PID: 2, StartedAt: m.Add(-time.Hour), SeenAt: m}
	for _, p := range []queue.ProcessInfo{old, fresh} {
		if err := st.TouchProcess(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	prune := queue.ActivityPrune{Before: m.Add(-time.Hour), Limit: 2, ProcessesSeenBefore: m.Add(-time.Minute)}
	for i, want := range []int64{2, 1, 0} {
		n, err := st.PruneActivity(ctx, prune)
		if err != nil || n != want {
			t.Fatalf("prune %d: %d rows, %v; want %d", i, n, err, want)
		}
	}
	got, err := q.Activity(ctx, m.Add(-4*time.Hour))
	if err != nil || len(got) != 1 || !got[0].Minute.Equal(m) {
		t.Fatalf("after prune: %+v, %v; want the current minute alone", got, err)
	}
	ps, err := q.Processes(ctx)
	if err != nil || len(ps) != 1 || ps[0].ID != "fresh" {
		t.Fatalf("processes after prune: %+v, %v; want fresh alone", ps, err)
	}
}

// ProcessRowHeartbeatAndRemoval: TouchProcess stores a process, updates
// its queues, concurrency and last seen (not its start), and RemoveProcess
// deletes it.
func testProcessRow(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	st, ctx := activityStore(t, q), ctxFor(t)
	start := time.Now().UTC().Add(-time.Minute).Truncate(time.Microsecond)
	p := queue.ProcessInfo{ID: "0123456789abcdef", Host: "host-ü.example", PID: 4242, Queues: []string{"a", "b.c"},
		Concurrency: 12, StartedAt: start, SeenAt: start}
	list := func() []queue.ProcessInfo {
		t.Helper()
		ps, err := q.Processes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	same := func(a, b queue.ProcessInfo) bool {
		return a.ID == b.ID && a.Host == b.Host && a.PID == b.PID && slices.Equal(a.Queues, b.Queues) &&
			a.Concurrency == b.Concurrency && a.StartedAt.Equal(b.StartedAt) && a.SeenAt.Equal(b.SeenAt)
	}
	if err := st.TouchProcess(ctx, p); err != nil {
		t.Fatal(err)
	}
	if ps := list(); len(ps) != 1 || !same(ps[0], p) {
		t.Fatalf("stored %+v, listed %+v", p, ps)
	}
	beat := p
	beat.Queues, beat.Concurrency, beat.SeenAt = nil, 0, start.Add(30*time.Second)
	beat.StartedAt = start.Add(time.Hour) // ignored: a process starts once
	if err := st.TouchProcess(ctx, beat); err != nil {
		t.Fatal(err)
	}
	beat.StartedAt = start
	if ps := list(); len(ps) != 1 || !same(ps[0], beat) {
		t.Fatalf("after a heartbeat %+v, listed %+v", beat, ps)
	}
	for range 2 {
		if err := st.RemoveProcess(ctx, p.ID); err != nil {
			t.Fatal(err)
		}
	}
	if ps := list(); len(ps) != 0 {
		t.Fatalf("after RemoveProcess: %+v", ps)
	}
}

// WorkerCountsItsActivity: a Worker with an Activity counts what it did —
// the stored counts match its runs and its Stats — and lists itself in the
// process row while it runs; the row goes when the Activity stops.
func testWorkerActivity(t *testing.T, s *suite) {
	const total = 60
	q := s.queue(t, queue.Config{})
	ctx := ctxFor(t)
	jobs := make([]queue.NewJob, total)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: "act", Payload: []byte("x"), MaxAttempts: 5}
		if i%2 == 0 {
			jobs[i].Kind = "even"
		}
	}
	ids := enqueue(t, q, jobs...)
	// By position, not by id: ids need not be consecutive (Galera steps
	// auto-increment by the cluster's size).
	pos := make(map[int64]int, len(ids))
	for i, id := range ids {
		pos[id] = i
	}
	var ended atomic.Int64
	handler := func(ctx context.Context, j *queue.Job) error {
		switch pos[j.ID] % 3 {
		case 0:
			ended.Add(1)
			return queue.Permanent(errors.New("dead at once"))
		case 1:
			if j.Attempt == 0 {
				return errors.New("fails once")
			}
		}
		ended.Add(1)
		return nil
	}
	act, err := queue.NewActivity(q, queue.ActivityConfig{Host: "test-host"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := queue.NewWorker(q, handler, queue.WorkerConfig{Queue: "act", Concurrency: 4, Activity: act,
		PollInterval: 20 * time.Millisecond, Backoff: func(int) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	r := startWorker(t, ctx, w)
	until(t, "every job ended", func() bool { return ended.Load() >= total && w.Stats().Completed+w.Stats().Dead >= total }, r)
	if err := act.Flush(ctx, true); err != nil {
		t.Fatal(err)
	}
	ps, err := q.Processes(ctx)
	if err != nil || len(ps) != 1 {
		t.Fatalf("processes while running: %+v, %v", ps, err)
	}
	if p := ps[0]; p.ID != act.ID() || p.Host != "test-host" || p.PID != os.Getpid() ||
		!slices.Equal(p.Queues, []string{"act"}) || p.Concurrency != 4 {
		t.Errorf("process row %+v", p)
	}
	if err := r.stop(0); err != nil {
		t.Fatal(err)
	}
	if err := act.Flush(ctx, false); err != nil {
		t.Fatal(err)
	}
	counts, err := q.Activity(ctx, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var sum queue.ActivityCount
	for _, c := range counts {
		if c.Queue != "act" {
			t.Errorf("count of queue %q", c.Queue)
		}
		sum.Completed, sum.Retried, sum.Dead = sum.Completed+c.Completed, sum.Retried+c.Retried, sum.Dead+c.Dead
	}
	st := w.Stats()
	want := queue.ActivityCount{Completed: 2 * total / 3, Retried: total / 3, Dead: total / 3}
	if sum != want || st.Completed != want.Completed || st.Retried != want.Retried+want.Dead || st.Dead != want.Dead {
		t.Fatalf("stored %+v, worker stats %+v; want %+v", sum, st, want)
	}
	// A stopped Activity flushes once more and removes its row.
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	if err := act.Run(stopped); err != nil {
		t.Fatal(err)
	}
	if ps, err := q.Processes(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("processes after the Activity stopped: %+v, %v", ps, err)
	}
}
