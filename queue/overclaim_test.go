package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/dbqueue/dbq/internal/memq"
	"github.com/dbqueue/dbq/queue"
)

// overClaimer breaks the Claimer contract: it returns two jobs more than
// asked for.
type overClaimer struct{ queue.Claimer }

func (c overClaimer) Claim(ctx context.Context, q string, n int) ([]*queue.Job, error) {
	return c.Claimer.Claim(ctx, q, n+2)
}

// A claimer that returns more jobs than asked for does not stop the
// Worker: it runs what it has slots for and gives the rest back, and every
// job ends done.
func TestWorkerGivesBackJobsOverItsClaim(t *testing.T) {
	const n = 100
	store := memq.New(time.Minute)
	d := &wrapDriver{Driver: store.Driver(), wrap: func(c queue.Claimer) queue.Claimer { return overClaimer{c} }}
	q, _ := queue.New(d, queue.Config{})
	jobs := make([]queue.NewJob, n)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: "o"}
	}
	if _, err := q.Enqueue(context.Background(), jobs...); err != nil {
		t.Fatal(err)
	}
	w, err := queue.NewWorker(q, func(context.Context, *queue.Job) error {
		time.Sleep(time.Millisecond)
		return nil
	}, queue.WorkerConfig{Queue: "o", Concurrency: 4, BatchSize: 4, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	waitFor(t, "every job to be completed", func() bool { return w.Stats().Completed >= n })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Completed != n {
		t.Fatalf("stats %+v: want %d completed", st, n)
	}
}
