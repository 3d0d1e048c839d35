package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// demoOptions are dbq demo's flags.
type demoOptions struct {
	jobs, workers, concurrency int
	keep                       bool
}

func demoCmd(g *globals) *cobra.Command {
	o := &demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Migrate, enqueue jobs and drain them with workers; counts duplicates (embedded SQLite unless --dsn)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return o.run(cmd, g) },
	}
	f := cmd.Flags()
	f.IntVar(&o.jobs, "jobs", 10_000, "jobs to enqueue and drain")
	f.IntVar(&o.workers, "workers", 4, "workers, each with its own claimer")
	f.IntVar(&o.concurrency, "concurrency", 8, "handlers per worker")
	f.BoolVar(&o.keep, "keep", false, "keep the demo's SQLite file")
	return cmd
}

// demoQueue is the queue the demo fills and drains.
const demoQueue = "demo"

// run migrates the database (a SQLite file of its own without --dsn),
// enqueues the jobs, drains them and says whether each ran once.
func (o *demoOptions) run(cmd *cobra.Command, g *globals) error {
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	if !cmd.Flags().Changed("dsn") && os.Getenv("DBQ_DSN") == "" {
		dir, err := os.MkdirTemp("", "dbq-demo-")
		if err != nil {
			return err
		}
		if !o.keep {
			defer os.RemoveAll(dir)
		}
		g.dsn = "sqlite:" + filepath.Join(dir, "demo.db")
	}
	if o.jobs < 1 || o.workers < 1 || o.concurrency < 1 {
		return fmt.Errorf("--jobs, --workers and --concurrency must be positive")
	}
	fmt.Fprintf(out, "dbq demo on %s\n", dialect.Redact(g.dsn))
	p, db, err := dbq.Migrator(ctx, g.dsn, g.config())
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		db.Close()
		return fmt.Errorf("migrate up: %w", err)
	}
	db.Close()
	q, err := g.open(ctx, g.config())
	if err != nil {
		return err
	}
	defer q.Close()

	start := time.Now()
	for i := 0; i < o.jobs; {
		n := min(1000, o.jobs-i)
		batch := make([]queue.NewJob, n)
		for k := range batch {
			batch[k] = queue.NewJob{Queue: demoQueue, Payload: fmt.Appendf(nil, `{"n":%d}`, i+k)}
		}
		if _, err := q.Enqueue(ctx, batch...); err != nil {
			return err
		}
		i += n
	}
	enqueueTime := time.Since(start)
	fmt.Fprintf(out, "enqueued %d jobs in %v (%.0f jobs/s)\n", o.jobs, enqueueTime.Round(time.Millisecond), float64(o.jobs)/enqueueTime.Seconds())

	ledger, elapsed, err := o.drain(ctx, q, out, g)
	if err != nil {
		return err
	}
	dups := 0
	for _, n := range ledger {
		dups += n - 1
	}
	left, err := q.Stats(ctx)
	if err != nil {
		return err
	}
	var remaining int64
	for _, s := range left {
		remaining += s.Ready + s.Scheduled + s.Held + s.Dead
	}
	fmt.Fprintf(out, "\njobs: %d   ran: %d   duplicates: %d   left in queue: %d\n", o.jobs, len(ledger), dups, remaining)
	fmt.Fprintf(out, "drained with %d workers × %d handlers in %v: %.0f jobs/s\n",
		o.workers, o.concurrency, elapsed.Round(time.Millisecond), float64(o.jobs)/elapsed.Seconds())
	if dups != 0 || len(ledger) != o.jobs || remaining != 0 {
		return fmt.Errorf("demo: %d duplicates, %d of %d jobs ran, %d left", dups, len(ledger), o.jobs, remaining)
	}
	return nil
}

// drain runs the Workers until every job has run once, drawing a progress
// bar on a terminal, and returns how often each job ran and how long it
// took.
func (o *demoOptions) drain(ctx context.Context, q *queue.Queue, out io.Writer, g *globals) (map[int64]int, time.Duration, error) {
	var (
		mu     sync.Mutex
		ledger = make(map[int64]int, o.jobs)
		done   atomic.Int64
	)
	bar := progressbar.NewOptions(o.jobs,
		progressbar.OptionSetWriter(out),
		progressbar.OptionSetDescription("draining"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("jobs"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetVisibility(isTerminal(out)),
	)
	handler := func(ctx context.Context, j *queue.Job) error {
		mu.Lock()
		ledger[j.ID]++
		mu.Unlock()
		done.Add(1)
		_ = bar.Add(1)
		return nil
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errs := make(chan error, o.workers)
	start := time.Now()
	for range o.workers {
		w, err := queue.NewWorker(q, handler, queue.WorkerConfig{
			Queue: demoQueue, Concurrency: o.concurrency, BatchSize: min(1000, 4*o.concurrency),
			PollInterval: 50 * time.Millisecond, Logger: g.logger(),
		})
		if err != nil {
			return nil, 0, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- w.Run(wctx)
		}()
	}
	for done.Load() < int64(o.jobs) && wctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	// Stopping the workers flushes their last completions.
	stop()
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		if err != nil {
			return nil, 0, err
		}
	}
	_ = bar.Finish()
	return ledger, elapsed, nil
}

func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
