package metrics_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/dbqueue/dbq/metrics"
	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/sqlite"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Wire a worker and a queue's depth into a Prometheus registry. In a
// server, serve reg with promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dbq-metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "jobs.db")
	db, err := sqlite.OpenDB(path)
	if err != nil {
		log.Fatal(err)
	}
	if err := sqlite.Migrate(ctx, db, sqlite.Config{}); err != nil {
		log.Fatal(err)
	}
	db.Close()
	q, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()

	reg := prometheus.NewRegistry()
	hooks, err := metrics.NewHooks(reg)
	if err != nil {
		log.Fatal(err)
	}
	reg.MustRegister(metrics.NewQueueCollector(q, metrics.CollectorConfig{}))
	// The worker reports through the hooks.
	_, err = queue.NewWorker(q, func(context.Context, *queue.Job) error { return nil },
		queue.WorkerConfig{Queue: "email", Hooks: hooks})
	if err != nil {
		log.Fatal(err)
	}

	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "email"}, queue.NewJob{Queue: "email"}); err != nil {
		log.Fatal(err)
	}
	n, err := testutil.GatherAndCount(reg, "dbq_queue_jobs")
	fmt.Println("dbq_queue_jobs series:", n, err)
	// Output: dbq_queue_jobs series: 4 <nil>
}
