package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/sqlite"
)

// A producer and a Worker on an embedded SQLite file. A handler returns nil
// to complete its job and an error to retry it later; the worker stops
// claiming and drains when its context is cancelled.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dbq-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	q, err := sqlite.Open(ctx, filepath.Join(dir, "jobs.db"), sqlite.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	db := q.Driver().(*sqlite.Driver).DB()
	if err := sqlite.Migrate(ctx, db, sqlite.Config{}); err != nil { // or `dbq migrate up`
		log.Fatal(err)
	}

	// One job, then a batch of three in one transaction.
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "email", Payload: []byte("ada@example.com")}); err != nil {
		log.Fatal(err)
	}
	batch := []queue.NewJob{
		{Queue: "email", Payload: []byte("grace@example.com")},
		{Queue: "email", Payload: []byte("edsger@example.com")},
		{Queue: "email", Payload: []byte("barbara@example.com"), Priority: -1}, // lower runs first
	}
	if _, err := q.Enqueue(ctx, batch...); err != nil {
		log.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	var sent atomic.Int64
	w, err := queue.NewWorker(q, func(ctx context.Context, j *queue.Job) error {
		if string(j.Payload) == "" {
			return queue.Permanent(errors.New("no address")) // dead at once, no retries
		}
		if sent.Add(1) == 4 {
			stop() // all sent: drain and return
		}
		return nil
	}, queue.WorkerConfig{Queue: "email", Concurrency: 2, PollInterval: 10 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Run(runCtx); err != nil {
		log.Fatal(err)
	}

	st := w.Stats()
	fmt.Println("completed:", st.Completed, "retried:", st.Retried)
	stats, err := q.Stats(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("queues with jobs left:", len(stats))
	// Output:
	// completed: 4 retried: 0
	// queues with jobs left: 0
}
