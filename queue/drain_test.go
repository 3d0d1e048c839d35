package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dbqueue/dbq/internal/memq"
	"github.com/dbqueue/dbq/queue"
)

// TestWorkerExitWhenEmpty: with ExitWhenEmpty, Run returns nil by itself
// once the queue holds nothing due and none of its jobs is unsettled. A
// job that enqueues another 100 ms into its run (the queue looks empty
// meanwhile) keeps it going until that one ran too; a job that fails
// waits out its backoff and a job scheduled later stays. Run on an empty
// queue returns at once.
func TestWorkerExitWhenEmpty(t *testing.T) {
	q, err := queue.New(memq.New(time.Minute).Driver(), queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jobs := []queue.NewJob{
		{Queue: "d", Payload: []byte("spawn")},
		{Queue: "d", Payload: []byte("fail")},
		{Queue: "d", Delay: time.Hour},
	}
	for range 20 {
		jobs = append(jobs, queue.NewJob{Queue: "d", Payload: []byte("ok")})
	}
	if _, err := q.Enqueue(ctx, jobs...); err != nil {
		t.Fatal(err)
	}
	w, err := queue.NewWorker(q, func(ctx context.Context, j *queue.Job) error {
		switch string(j.Payload) {
		case "spawn":
			time.Sleep(100 * time.Millisecond)
			_, err := q.Enqueue(ctx, queue.NewJob{Queue: "d", Payload: []byte("child")})
			return err
		case "fail":
			return errors.New("fails")
		}
		return nil
	}, queue.WorkerConfig{Queue: "d", Concurrency: 4, PollInterval: 10 * time.Millisecond, ExitWhenEmpty: true,
		Backoff: func(int) time.Duration { return time.Hour }})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); err != nil || ctx.Err() != nil {
		t.Fatalf("Run = %v (context: %v), want nil before the deadline", err, ctx.Err())
	}
	if st := w.Stats(); st.Claimed != 23 || st.Completed != 22 || st.Retried != 1 {
		t.Fatalf("stats %+v: want 23 claimed (20, the spawner, its child, the failing job), 22 completed, 1 retried", st)
	}
	st, err := q.Stats(ctx)
	if err != nil || len(st) != 1 || st[0].Ready != 0 || st[0].Scheduled != 2 || st[0].Held != 0 {
		t.Fatalf("queue stats %+v, %v: want the failing and the scheduled job left, both later", st, err)
	}
	// Nothing due: a second Run returns at once, having claimed nothing.
	if err := w.Run(ctx); err != nil || w.Stats().Claimed != 23 {
		t.Fatalf("second Run = %v, claimed %d in all: want nil and none more", err, w.Stats().Claimed)
	}
}
