package queue_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/sqlite"
)

// An app that runs Workers keeps the dashboard's Workers page and
// throughput charts current as `dbq work` does: one Activity per process,
// shared by its Workers, running until the Workers have drained.
func ExampleActivity() {
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
	if err := sqlite.Migrate(ctx, q.Driver().(*sqlite.Driver).DB(), sqlite.Config{}); err != nil {
		log.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "email"}, queue.NewJob{Queue: "email"}); err != nil {
		log.Fatal(err)
	}

	act, err := queue.NewActivity(q, queue.ActivityConfig{}) // ErrUnsupported: the driver keeps none
	if err != nil {
		log.Fatal(err)
	}
	actCtx, stopActivity := context.WithCancel(ctx)
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		_ = act.Run(actCtx) // flushes every 10 s; when stopped, once more, then removes the process row
	}()

	runCtx, stop := context.WithCancel(ctx)
	var done atomic.Int64
	w, err := queue.NewWorker(q, func(context.Context, *queue.Job) error {
		if done.Add(1) == 2 {
			stop()
		}
		return nil
	}, queue.WorkerConfig{Queue: "email", Activity: act, PollInterval: 10 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Run(runCtx); err != nil {
		log.Fatal(err)
	}
	stopActivity() // after the Workers: their last counts are flushed
	<-flushed

	counts, err := q.Activity(ctx, time.Now().Add(-time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	var completed int64
	for _, c := range counts {
		completed += c.Completed
	}
	procs, err := q.Processes(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("completed in the last hour:", completed, "processes:", len(procs))
	// Output: completed in the last hour: 2 processes: 0
}
