package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dbqueue/dbq/internal/memq"
	"github.com/dbqueue/dbq/queue"
)

func TestConfigValidate(t *testing.T) {
	if err := (queue.Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	d := (queue.Config{}).WithDefaults()
	if d.Prefix != "dbq_" || d.MaxAttempts != queue.DefaultMaxAttempts || d.Lease != queue.DefaultLease ||
		d.MaxPayloadBytes != queue.DefaultMaxPayloadBytes || d.Logger == nil {
		t.Fatalf("defaults %+v", d)
	}
	for _, tc := range []struct {
		cfg  queue.Config
		want error
	}{
		{queue.Config{Prefix: "x;"}, queue.ErrInvalidIdentifier},
		{queue.Config{Schema: `s"`}, queue.ErrInvalidIdentifier},
		{queue.Config{MaxAttempts: -1}, queue.ErrInvalidConfig},
		{queue.Config{MaxPayloadBytes: -5}, queue.ErrInvalidConfig},
		{queue.Config{Lease: time.Microsecond}, queue.ErrInvalidConfig},
	} {
		if err := tc.cfg.Validate(); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.cfg, err, tc.want)
		}
		if _, err := queue.New(memq.New(time.Second).Driver(), tc.cfg); !errors.Is(err, tc.want) {
			t.Errorf("New(%+v): %v, want %v", tc.cfg, err, tc.want)
		}
	}
	if _, err := queue.New(nil, queue.Config{}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("New(nil): %v", err)
	}
}

func TestExponentialBackoff(t *testing.T) {
	b := queue.ExponentialBackoff(time.Second, time.Minute)
	for attempt, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		for range 50 {
			got := b(attempt)
			if got < want*8/10 || got > want*12/10 {
				t.Fatalf("attempt %d: %v, want %v ±20%%", attempt, got, want)
			}
		}
	}
	for _, attempt := range []int{6, 20, 63, 64, 1000} {
		if got := b(attempt); got > time.Minute*12/10 || got < time.Minute*8/10 {
			t.Fatalf("attempt %d: %v, want about the 1m cap", attempt, got)
		}
	}
}

func TestLostLeases(t *testing.T) {
	want := []queue.Lease{{ID: 1, Token: 9}, {ID: 2, Token: 9}, {ID: 3, Token: 9}}
	if err := queue.LostLeases(want, []int64{3, 1, 2}); err != nil {
		t.Fatalf("all done: %v", err)
	}
	err := queue.LostLeases(want, []int64{2})
	var lost *queue.LeaseLostError
	if !errors.As(err, &lost) || !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("%v is not a LeaseLostError", err)
	}
	if len(lost.IDs) != 2 || lost.IDs[0] != 1 || lost.IDs[1] != 3 {
		t.Fatalf("lost %v, want [1 3]", lost.IDs)
	}
}

func TestEnqueueValidation(t *testing.T) {
	q, err := queue.New(memq.New(time.Second).Driver(), queue.Config{MaxPayloadBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		job  queue.NewJob
		want error
	}{
		{queue.NewJob{Queue: ""}, queue.ErrInvalidQueue},
		{queue.NewJob{Queue: "a", Payload: make([]byte, 11)}, queue.ErrPayloadTooLarge},
		{queue.NewJob{Queue: "a", MaxAttempts: -2}, queue.ErrInvalidJob},
		{queue.NewJob{Queue: "a", Delay: -time.Second}, queue.ErrInvalidJob},
	} {
		if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "a"}, tc.job); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.job, err, tc.want)
		}
	}
	if st, _ := q.Stats(ctx); len(st) != 0 {
		t.Fatalf("a rejected batch stored jobs: %+v", st)
	}
	if ids, err := q.Enqueue(ctx); err != nil || ids != nil {
		t.Fatalf("empty Enqueue: %v %v", ids, err)
	}
}

func TestNewWorkerValidation(t *testing.T) {
	q, _ := queue.New(memq.New(time.Second).Driver(), queue.Config{})
	h := func(context.Context, *queue.Job) error { return nil }
	for _, tc := range []struct {
		cfg  queue.WorkerConfig
		want error
	}{
		{queue.WorkerConfig{}, queue.ErrInvalidQueue},
		{queue.WorkerConfig{Queue: "a", Concurrency: -1}, queue.ErrInvalidConfig},
		{queue.WorkerConfig{Queue: "a", BatchSize: 5000}, queue.ErrInvalidConfig},
		{queue.WorkerConfig{Queue: "a", PollInterval: -1}, queue.ErrInvalidConfig},
	} {
		if _, err := queue.NewWorker(q, h, tc.cfg); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.cfg, err, tc.want)
		}
	}
	if _, err := queue.NewWorker(q, nil, queue.WorkerConfig{Queue: "a"}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("nil handler: %v", err)
	}
}

// A handler whose lease is lost (another holder took the job) has its
// context cancelled, and its late result changes nothing.
func TestWorkerCancelsHandlerOnLostLease(t *testing.T) {
	store := memq.New(150 * time.Millisecond)
	q, _ := queue.New(store.Driver(), queue.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ids, err := q.Enqueue(ctx, queue.NewJob{Queue: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	h := func(hctx context.Context, j *queue.Job) error {
		close(started)
		<-hctx.Done()
		return hctx.Err()
	}
	hooks := newRecHooks()
	w, _ := queue.NewWorker(q, h, queue.WorkerConfig{Queue: "slow", Concurrency: 1, ShutdownTimeout: 10 * time.Second, Hooks: hooks})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	<-started
	store.Steal(ids[0])
	deadline := time.Now().Add(5 * time.Second)
	for w.Stats().LeasesLost == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.LeasesLost != 1 || st.Completed != 0 || st.Retried != 0 || st.Released != 0 {
		t.Fatalf("stats %+v: want one lost lease and nothing written", st)
	}
	if s, _ := q.Stats(ctx); len(s) != 1 || s[0].Held != 1 {
		t.Fatalf("queue %+v: the thief's claim must stand", s)
	}
	_, _, o := hooks.snapshot()
	hooks.mu.Lock()
	defer hooks.mu.Unlock()
	if o[queue.OutcomeLeaseLost] != 1 || len(o) != 1 || len(hooks.lost) != 1 || hooks.lost[0] != ids[0] {
		t.Fatalf("hooks: outcomes %v, LeasesLost %v; want one lease_lost run of job %d", o, hooks.lost, ids[0])
	}
}

// CountEachQueue keeps the queues with a job, in name order, and stops at
// the first error.
func TestCountEachQueue(t *testing.T) {
	ctx := context.Background()
	counts := map[string]queue.QueueStats{"b": {Ready: 2}, "a": {Dead: 1}, "empty": {Paused: true}, "c": {Held: 3}}
	var asked []string
	got, err := queue.CountEachQueue(ctx, []string{"c", "empty", "b", "a"}, func(_ context.Context, name string) (queue.QueueStats, error) {
		asked = append(asked, name)
		return counts[name], nil
	})
	if err != nil || len(asked) != 4 {
		t.Fatalf("CountEachQueue: %v, asked %v", err, asked)
	}
	want := []queue.QueueStats{{Queue: "a", Dead: 1}, {Queue: "b", Ready: 2}, {Queue: "c", Held: 3}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("got[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	boom := errors.New("boom")
	asked = nil
	_, err = queue.CountEachQueue(ctx, []string{"a", "b"}, func(_ context.Context, name string) (queue.QueueStats, error) {
		asked = append(asked, name)
		return queue.QueueStats{}, boom
	})
	if !errors.Is(err, boom) || len(asked) != 1 {
		t.Errorf("error: %v after asking %v, want boom after a", err, asked)
	}
}
