package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// WorkerRunsEveryJobOnce: a Worker drains a queue; handlers that fail once
// or panic once are retried, every job ends completed exactly once.
func testWorkerDrains(t *testing.T, s *suite) {
	const total = 2000
	q := s.queue(t, queue.Config{})
	enqueueN(t, q, "work", total)
	var (
		mu     sync.Mutex
		runs   = map[int64]int{}
		okRuns atomic.Int64
	)
	handler := func(ctx context.Context, j *queue.Job) error {
		mu.Lock()
		runs[j.ID]++
		n := runs[j.ID]
		mu.Unlock()
		switch {
		case j.ID%97 == 0 && n == 1:
			panic("first run panics")
		case j.ID%13 == 0 && n == 1:
			return errors.New("first run fails")
		}
		okRuns.Add(1)
		return nil
	}
	ctx := ctxFor(t)
	var workers []*queue.Worker
	var running []*runningWorker
	for range 3 {
		w, err := queue.NewWorker(q, handler, queue.WorkerConfig{
			Queue: "work", Concurrency: 8, PollInterval: 20 * time.Millisecond,
			Backoff: func(int) time.Duration { return 0 },
		})
		if err != nil {
			t.Fatal(err)
		}
		workers = append(workers, w)
		running = append(running, startWorker(t, ctx, w))
	}
	until(t, fmt.Sprintf("%d successful runs", total), func() bool { return okRuns.Load() >= total }, running...)
	for _, r := range running {
		if err := r.stop(0); err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	if okRuns.Load() != total {
		t.Fatalf("%d of %d jobs succeeded", okRuns.Load(), total)
	}
	var st queue.WorkerStats
	for _, w := range workers {
		ws := w.Stats()
		st.Completed += ws.Completed
		st.Retried += ws.Retried
		st.Panics += ws.Panics
	}
	if st.Completed != total || st.Retried == 0 || st.Panics == 0 {
		t.Fatalf("worker stats %+v: want %d completed and some retries and panics", st, total)
	}
	for id, n := range runs {
		want := 1
		if id%97 == 0 || id%13 == 0 {
			want = 2
		}
		if n != want {
			t.Errorf("job %d ran %d times, want %d", id, n, want)
		}
	}
	wantCounts(t, q, "work", 0, 0, 0, 0)
}

// WorkerShutsDownGracefully: on cancel a Worker stops claiming, lets short
// handlers finish, cancels long ones after ShutdownTimeout and releases
// their jobs without spending an attempt; nothing is lost.
func testWorkerShutdown(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	enqueueN(t, q, "shut", 20)
	started := make(chan int64, 20)
	handler := func(ctx context.Context, j *queue.Job) error {
		started <- j.ID
		if j.ID%2 == 0 {
			time.Sleep(50 * time.Millisecond) // finishes within the timeout
			return nil
		}
		<-ctx.Done() // runs until cancelled
		return ctx.Err()
	}
	w, err := queue.NewWorker(q, handler, queue.WorkerConfig{
		Queue: "shut", Concurrency: 4, ShutdownTimeout: 300 * time.Millisecond, PollInterval: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := startWorker(t, ctxFor(t), w)
	for i := range 4 {
		await(r, started, fmt.Sprintf("handler %d of 4 to start", i+1))
	}
	if err := r.stop(30 * time.Second); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	st := w.Stats()
	if st.Released == 0 {
		t.Errorf("stats %+v: want released jobs", st)
	}
	if st.Retried != 0 {
		t.Errorf("stats %+v: shutdown spent attempts", st)
	}
	// Every job not completed is claimable at once, none spent an attempt.
	c := s.claimer(t, q)
	left := claim(t, c, "shut", 100)
	for _, j := range left {
		if j.Attempt != 0 {
			t.Errorf("job %d attempt %d after shutdown", j.ID, j.Attempt)
		}
	}
	if int64(len(left))+st.Completed != 20 {
		t.Fatalf("%d claimable + %d completed != 20 (stats %+v)", len(left), st.Completed, st)
	}
	complete(t, c, left)
}

// WorkerMarksDead: a job that keeps failing is dead after max_attempts,
// and a Permanent error makes it dead at once.
func testWorkerDead(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	enqueue(t, q,
		queue.NewJob{Queue: "wd", Payload: []byte("flaky"), MaxAttempts: 3},
		queue.NewJob{Queue: "wd", Payload: []byte("fatal"), MaxAttempts: 3},
	)
	var runs sync.Map
	handler := func(ctx context.Context, j *queue.Job) error {
		n, _ := runs.LoadOrStore(string(j.Payload), new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		if string(j.Payload) == "fatal" {
			return queue.Permanent(fmt.Errorf("cannot ever work"))
		}
		return fmt.Errorf("attempt %d failed", j.Attempt)
	}
	w, err := queue.NewWorker(q, handler, queue.WorkerConfig{
		Queue: "wd", Concurrency: 2, PollInterval: 10 * time.Millisecond,
		Backoff: func(int) time.Duration { return 0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	r := startWorker(t, ctxFor(t), w)
	until(t, "2 dead jobs", func() bool { return stats(t, q, "wd").Dead >= 2 }, r)
	if err := r.stop(0); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, q, "wd", 0, 0, 0, 2)
	for name, want := range map[string]int64{"flaky": 3, "fatal": 1} {
		n, _ := runs.Load(name)
		if n == nil || n.(*atomic.Int64).Load() != want {
			t.Errorf("%s ran %v times, want %d", name, n, want)
		}
	}
}

// WorkerExitsWhenEmpty: with ExitWhenEmpty, Run returns nil by itself once
// the queue holds nothing due and none of the Worker's jobs is unsettled.
// A job that enqueues another 200 ms into its run (the queue looks empty
// meanwhile) keeps it going until that one ran too; a job that fails
// waits out its backoff and a job scheduled later stays. On the queue it
// left, Run returns at once, having claimed nothing.
func testWorkerExitWhenEmpty(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	jobs := []queue.NewJob{
		{Queue: "drain", Payload: []byte("spawn")},
		{Queue: "drain", Payload: []byte("fail")},
		{Queue: "drain", Delay: time.Hour},
	}
	for range 20 {
		jobs = append(jobs, queue.NewJob{Queue: "drain", Payload: []byte("ok")})
	}
	enqueue(t, q, jobs...)
	w, err := queue.NewWorker(q, func(ctx context.Context, j *queue.Job) error {
		switch string(j.Payload) {
		case "spawn":
			time.Sleep(200 * time.Millisecond)
			_, err := q.Enqueue(ctx, queue.NewJob{Queue: "drain", Payload: []byte("child")})
			return err
		case "fail":
			return errors.New("fails")
		}
		return nil
	}, queue.WorkerConfig{Queue: "drain", Concurrency: 4, PollInterval: 20 * time.Millisecond, ExitWhenEmpty: true,
		Backoff: func(int) time.Duration { return time.Hour }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	if err := w.Run(ctx); err != nil || ctx.Err() != nil {
		t.Fatalf("Run = %v (context: %v), want nil before the test's deadline", err, ctx.Err())
	}
	if st := w.Stats(); st.Claimed != 23 || st.Completed != 22 || st.Retried != 1 {
		t.Fatalf("stats %+v: want 23 claimed (20, the spawner, its child, the failing job), 22 completed, 1 retried", st)
	}
	wantCounts(t, q, "drain", 0, 2, 0, 0)
	if err := w.Run(ctx); err != nil || w.Stats().Claimed != 23 {
		t.Fatalf("second Run = %v, claimed %d in all: want nil and none more", err, w.Stats().Claimed)
	}
}
