package main

import (
	"context"
	"fmt"
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

func demoCmd(g *globals) *cobra.Command {
	var (
		jobs, workers, concurrency int
		keep                       bool
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Migrate, enqueue jobs and drain them with workers; counts duplicates (embedded SQLite unless --dsn)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			if !cmd.Flags().Changed("dsn") && os.Getenv("DBQ_DSN") == "" {
				dir, err := os.MkdirTemp("", "dbq-demo-")
				if err != nil {
					return err
				}
				if !keep {
					defer os.RemoveAll(dir)
				}
				g.dsn = "sqlite:" + filepath.Join(dir, "demo.db")
			}
			if jobs < 1 || workers < 1 || concurrency < 1 {
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
			const name = "demo"

			start := time.Now()
			for i := 0; i < jobs; {
				n := min(1000, jobs-i)
				batch := make([]queue.NewJob, n)
				for k := range batch {
					batch[k] = queue.NewJob{Queue: name, Payload: fmt.Appendf(nil, `{"n":%d}`, i+k)}
				}
				if _, err := q.Enqueue(ctx, batch...); err != nil {
					return err
				}
				i += n
			}
			enqueueTime := time.Since(start)
			fmt.Fprintf(out, "enqueued %d jobs in %v (%.0f jobs/s)\n", jobs, enqueueTime.Round(time.Millisecond), float64(jobs)/enqueueTime.Seconds())

			var (
				mu     sync.Mutex
				ledger = make(map[int64]int, jobs)
				done   atomic.Int64
			)
			bar := progressbar.NewOptions(jobs,
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
			errs := make(chan error, workers)
			start = time.Now()
			for range workers {
				w, err := queue.NewWorker(q, handler, queue.WorkerConfig{
					Queue: name, Concurrency: concurrency, BatchSize: min(1000, 4*concurrency),
					PollInterval: 50 * time.Millisecond, Logger: g.logger(),
				})
				if err != nil {
					return err
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- w.Run(wctx)
				}()
			}
			for done.Load() < int64(jobs) && wctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			// Stopping the workers flushes their last completions.
			stop()
			wg.Wait()
			elapsed := time.Since(start)
			close(errs)
			for err := range errs {
				if err != nil {
					return err
				}
			}
			_ = bar.Finish()
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
			fmt.Fprintf(out, "\njobs: %d   ran: %d   duplicates: %d   left in queue: %d\n", jobs, len(ledger), dups, remaining)
			fmt.Fprintf(out, "drained with %d workers × %d handlers in %v: %.0f jobs/s\n",
				workers, concurrency, elapsed.Round(time.Millisecond), float64(jobs)/elapsed.Seconds())
			if dups != 0 || len(ledger) != jobs || remaining != 0 {
				return fmt.Errorf("demo: %d duplicates, %d of %d jobs ran, %d left", dups, len(ledger), jobs, remaining)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&jobs, "jobs", 10_000, "jobs to enqueue and drain")
	f.IntVar(&workers, "workers", 4, "workers, each with its own claimer")
	f.IntVar(&concurrency, "concurrency", 8, "handlers per worker")
	f.BoolVar(&keep, "keep", false, "keep the demo's SQLite file")
	return cmd
}

func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
