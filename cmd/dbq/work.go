package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/dbqueue/dbq/metrics"
	"github.com/dbqueue/dbq/queue"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
)

func workCmd(g *globals) *cobra.Command {
	var (
		name            string
		concurrency     int
		lease           time.Duration
		shutdownTimeout time.Duration
		poll            time.Duration
		metricsAddr     string
		noWakeups       bool
		ledger          *ledgerOptions
	)
	cmd := &cobra.Command{
		Use:   "work --queue Q [flags] -- command [args...]",
		Short: "Run a command per job, payload on stdin; exit 0 completes the job, anything else retries it",
		Long: `work claims jobs from a queue and runs the command once per job, with the
payload on stdin and DBQ_JOB_ID, DBQ_JOB_QUEUE and DBQ_JOB_ATTEMPT in the
environment. Exit status 0 completes the job; any other status retries it with
exponential backoff, keeping the end of stderr as the job's last error; after
its attempts are spent the job is dead. SIGINT or SIGTERM drains gracefully:
no new claims, running commands get --shutdown-timeout to finish, then are
killed and their jobs released.

--metrics ADDR serves Prometheus metrics at http://ADDR/metrics while the
worker runs (see package metrics for the names): claims, runs by outcome,
latencies, and every queue's depth, counted on each scrape.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if ledger.table != "" {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.MinimumNArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := g.config()
			cfg.Lease = lease
			q, err := g.open(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer q.Close()
			wcfg := queue.WorkerConfig{
				Queue: name, Concurrency: concurrency, ShutdownTimeout: shutdownTimeout,
				PollInterval: poll, Logger: cfg.Logger, DisableWakeups: noWakeups,
			}
			if metricsAddr != "" {
				hooks, addr, stop, err := serveMetrics(q, metricsAddr, cfg.Logger)
				if err != nil {
					return err
				}
				// Served until the worker has drained, so a scrape can
				// watch the drain.
				defer stop()
				wcfg.Hooks = hooks
				fmt.Fprintf(cmd.ErrOrStderr(), "dbq work: metrics on http://%s/metrics\n", addr)
			}
			var h queue.Handler
			if ledger.table != "" {
				l, err := ledger.open(g.dsn, g.schema, cfg.Logger)
				if err != nil {
					return err
				}
				defer l.Close()
				h = l.handle
			} else {
				h = commandHandler(args)
			}
			w, err := queue.NewWorker(q, h, wcfg)
			if err != nil {
				return err
			}
			err = w.Run(cmd.Context())
			st := w.Stats()
			fmt.Fprintf(cmd.ErrOrStderr(), "dbq work: %d completed, %d retried (%d dead), %d snoozed, %d released, %d leases lost\n",
				st.Completed, st.Retried, st.Dead, st.Snoozed, st.Released, st.LeasesLost)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVarP(&name, "queue", "q", "default", "queue to work")
	f.IntVarP(&concurrency, "concurrency", "c", 10, "commands run at once")
	f.DurationVar(&lease, "lease", queue.DefaultLease, "lease per claim, renewed while the command runs (lease-based claimers)")
	f.DurationVar(&shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long running commands may finish")
	f.DurationVar(&poll, "poll", time.Second, "pause after a claim that found fewer jobs than free slots")
	f.StringVar(&metricsAddr, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics, e.g. :9090")
	f.BoolVar(&noWakeups, "no-wakeups", false, "only poll, even where the database can wake idle workers (PostgreSQL LISTEN/NOTIFY)")
	ledger = addLedgerFlags(f)
	return cmd
}

// serveMetrics listens on addr and serves the worker's metrics, the
// queue-depth collector and the Go runtime's on /metrics. It returns the
// hooks for the worker, the address it listens on, and a function that
// shuts the server down.
func serveMetrics(q *queue.Queue, addr string, log *slog.Logger) (*metrics.Hooks, string, func(), error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	hooks, err := metrics.NewHooks(reg)
	if err != nil {
		return nil, "", nil, err
	}
	if err := reg.Register(metrics.NewQueueCollector(q, metrics.CollectorConfig{Logger: log})); err != nil {
		return nil, "", nil, err
	}
	// Listen here rather than in Serve, so that a bad or busy address
	// fails the command before the worker claims anything.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", nil, fmt.Errorf("--metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		Timeout:  30 * time.Second,
	}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("dbq: metrics server failed", "err", err)
		}
	}()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
		<-served
	}
	return hooks, ln.Addr().String(), stop, nil
}

// commandHandler runs argv per job with the payload on stdin.
func commandHandler(argv []string) queue.Handler {
	return func(ctx context.Context, j *queue.Job) error {
		c := exec.CommandContext(ctx, argv[0], argv[1:]...)
		c.Stdin = bytes.NewReader(j.Payload)
		c.Stdout = os.Stdout
		var stderr tail
		c.Stderr = &stderr
		c.Env = append(os.Environ(),
			"DBQ_JOB_ID="+strconv.FormatInt(j.ID, 10),
			"DBQ_JOB_QUEUE="+j.Queue,
			"DBQ_JOB_ATTEMPT="+strconv.Itoa(j.Attempt),
		)
		c.WaitDelay = 5 * time.Second
		err := c.Run()
		if stderr.Len() > 0 {
			os.Stderr.Write(stderr.Bytes())
		}
		if err == nil {
			return nil
		}
		var exit *exec.ExitError
		if errors.As(err, &exit) && stderr.Len() > 0 {
			return fmt.Errorf("%s: %v: %s", argv[0], err, bytes.TrimSpace(stderr.Bytes()))
		}
		return fmt.Errorf("%s: %w", argv[0], err)
	}
}

// tail keeps the last 4 KiB written to it.
type tail struct{ bytes.Buffer }

func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	t.Buffer.Write(p)
	if over := t.Len() - 4096; over > 0 {
		t.Next(over)
	}
	return n, nil
}
