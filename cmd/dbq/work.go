package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/dbqueue/dbq/metrics"
	"github.com/dbqueue/dbq/queue"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
)

// workOptions are dbq work's flags.
type workOptions struct {
	name            string
	concurrency     int
	lease           time.Duration
	shutdownTimeout time.Duration
	poll            time.Duration
	metricsAddr     string
	noWakeups       bool
	scheduleFile    string
	kindRoutes      []string
	noActivity      bool
	exitWhenEmpty   bool
	waitForDB       time.Duration
	ledger          *ledgerOptions
}

func workCmd(g *globals) *cobra.Command {
	o := &workOptions{}
	cmd := &cobra.Command{
		Use:   "work --queue Q [--kind KIND=CMD]... [flags] [-- command [args...]]",
		Short: "Run a command per job, payload on stdin; exit 0 completes the job, anything else retries it",
		Long:  workLong,
		Args: func(cmd *cobra.Command, args []string) error {
			if o.ledger.table != "" {
				return cobra.NoArgs(cmd, args)
			}
			if len(o.kindRoutes) > 0 {
				return nil
			}
			return cobra.MinimumNArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, g, args) },
	}
	f := cmd.Flags()
	f.StringVarP(&o.name, "queue", "q", "default", "queue to work")
	f.IntVarP(&o.concurrency, "concurrency", "c", 10, "commands run at once")
	f.DurationVar(&o.lease, "lease", queue.DefaultLease, "lease per claim, renewed while the command runs (lease-based claimers)")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGINT or SIGTERM, how long running commands may finish")
	f.DurationVar(&o.poll, "poll", time.Second, "pause after a claim that found fewer jobs than free slots")
	f.StringVar(&o.metricsAddr, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics, e.g. :9090")
	f.BoolVar(&o.noWakeups, "no-wakeups", false, "only poll, even where the database can wake idle workers (PostgreSQL LISTEN/NOTIFY)")
	f.StringVar(&o.scheduleFile, "schedule", "", "also run the schedules of this crontab-like file (see dbq schedule --help)")
	f.StringArrayVar(&o.kindRoutes, "kind", nil, "KIND=CMD: run CMD (split at spaces) for jobs of KIND; repeatable")
	f.DurationVar(&o.waitForDB, "wait-for-db", time.Minute, "at start, keep trying this long while the database does not answer yet (0: fail at once)")
	f.BoolVar(&o.noActivity, "no-activity", false, "keep no process row and write no per-minute counts (the dashboard's Workers page and charts)")
	f.BoolVar(&o.exitWhenEmpty, "exit-when-empty", false, "exit 0 once a claim finds no job due and none of this process's is running (later jobs stay)")
	o.ledger = addLedgerFlags(f)
	return cmd
}

// run is dbq work: it opens the queue, starts what the flags ask for
// beside the Worker (metrics, activity, schedules) and runs the Worker
// until the command's context ends or a second signal stops it at once.
func (o *workOptions) run(cmd *cobra.Command, g *globals, args []string) error {
	if err := checkWorkFlags(o.concurrency, o.lease, o.shutdownTimeout, o.poll); err != nil {
		return err
	}
	routes, err := parseKindRoutes(o.kindRoutes)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		if err := resolveCommand("the command after --", args[0]); err != nil {
			return err
		}
	}
	cfg := g.config()
	cfg.Lease = o.lease
	if o.waitForDB < 0 {
		return fmt.Errorf("%w: --wait-for-db %v < 0", queue.ErrInvalidConfig, o.waitForDB)
	}
	q, err := g.openWait(cmd.Context(), cfg, o.waitForDB)
	if err != nil {
		return err
	}
	defer q.Close()
	wcfg := queue.WorkerConfig{
		Queue: o.name, Concurrency: o.concurrency, ShutdownTimeout: o.shutdownTimeout,
		PollInterval: o.poll, Logger: cfg.Logger, DisableWakeups: o.noWakeups, ExitWhenEmpty: o.exitWhenEmpty,
	}
	if o.metricsAddr != "" {
		hooks, addr, stop, err := serveMetrics(q, o.metricsAddr, cfg.Logger)
		if err != nil {
			return err
		}
		// Served until the worker has drained, so a scrape can
		// watch the drain.
		defer stop()
		wcfg.Hooks = hooks
		fmt.Fprintf(cmd.ErrOrStderr(), "dbq work: metrics on http://%s/metrics\n", addr)
	}
	if !o.noActivity {
		act, stop, err := runActivity(cmd.Context(), q, cfg.Logger)
		if err != nil {
			return err
		}
		// Stopped after the worker has drained: its last counts
		// are flushed, then the process row removed.
		defer stop()
		wcfg.Activity = act
	}
	var h queue.Handler
	if o.ledger.table != "" {
		l, err := o.ledger.open(cmd.Context(), g.dsn, g.schema, o.waitForDB, cfg.Logger)
		if err != nil {
			return err
		}
		defer l.Close()
		h = l.handle
	} else {
		g.forceHandled.Store(true)
		h = routeKinds(routes, args, jobEnv(), g.force, cfg.Logger)
	}
	w, err := queue.NewWorker(q, h, wcfg)
	if err != nil {
		return err
	}
	if o.scheduleFile != "" {
		stop, err := runSchedules(cmd.Context(), q, o.scheduleFile, cfg.Logger)
		if err != nil {
			return err
		}
		defer stop()
	}
	// A second signal ends the grace period at once: the running
	// commands are killed and their jobs released.
	ran := make(chan struct{})
	defer close(ran)
	go func() {
		select {
		case <-g.force:
			w.StopNow()
		case <-ran:
		}
	}()
	err = w.Run(cmd.Context())
	st := w.Stats()
	fmt.Fprintf(cmd.ErrOrStderr(), "dbq work: %d completed, %d retried (%d dead), %d snoozed, %d released, %d leases lost\n",
		st.Completed, st.Retried, st.Dead, st.Snoozed, st.Released, st.LeasesLost)
	return err
}

const workLong = `work claims jobs from a queue and runs the command once per job, with the
payload on stdin and DBQ_JOB_ID, DBQ_JOB_QUEUE, DBQ_JOB_KIND and
DBQ_JOB_ATTEMPT in the environment ($DBQ_DSN, if set, with its password masked). Exit status 0
completes the job; any other status retries it with exponential backoff,
keeping the end of stderr (up to 4000 bytes) as the job's last error; after its attempts
are spent the job is dead. stdout and stderr pass through as they come.

--kind KIND=CMD (repeatable) runs CMD, split at spaces, for jobs of that
kind; the command after -- runs every other job. With --kind and no command
after --, a job of a kind no --kind names is not run: it fails with "no
handler for the job's kind", is retried with backoff (a deploy may add the
route) and is dead after its attempts. A kind is letters, digits and _.:-
(no "=": the first one ends it). Every command, routes' and the one after
--, must be found at start (on PATH, or a path that exists): work refuses
to start on one that is not, naming it.

Each command runs in a process group of its own, so a terminal's Ctrl-C
reaches dbq alone. SIGINT or SIGTERM drains gracefully: no new claims,
running commands get --shutdown-timeout to finish, then their process group
gets SIGTERM, and SIGKILL 5 s later; their jobs are released with no attempt
spent. A second SIGINT or SIGTERM kills the running commands at once and
releases their jobs just the same. Whatever a command leaves running in its
process group (on Linux, anywhere below it) is killed when it exits.

No job command outlives dbq work, however dbq ends, kill -9 included: each
command runs under a small supervisor, dbq itself started again, which
holds one end of a pipe whose other end only dbq holds. When dbq goes, the
supervisor reads end-of-file, sends the command's process group SIGTERM,
and SIGKILL 5 s later. On Linux the supervisor is a child subreaper: what
the command started that left its group (setsid, a double fork) is killed
too, when the command exits or dbq goes; on other Unix systems only the
group is, and on Windows there is no supervisor. A job whose worker died
is run again once its claim lapses (at once with PostgreSQL's advisory
claimer, after --lease with the others): never alongside the old run,
unless that run ignores SIGTERM, and then for 5 s at most. The supervisor
costs each job a start of dbq: some milliseconds of CPU.

--metrics ADDR serves Prometheus metrics at http://ADDR/metrics while the
worker runs (see package metrics for the names): claims, runs by outcome,
latencies, and every queue's depth, counted on each scrape.

At start, a database that does not answer yet (refused or broken
connections, a server starting or restarting, no free connection slot, a
Galera node still joining) is tried again with backoff for up to
--wait-for-db, 1m by default; any other error, such as a bad password or
a missing database, ends the command at once.

Unless --no-activity is given, the process keeps a row in the processes
table while it runs (host, pid, queue, concurrency, last seen; removed at a
clean exit) and adds what it completed, retried and made dead per minute
to the activity table every 10 s: the dashboard's Workers page and
throughput charts. A database not migrated to version 6 only gets a
warning.

--exit-when-empty drains the queue and exits 0: once a claim finds no job
due and none of this process's is running, work stops as on SIGINT (with
nothing left to finish). Jobs scheduled for later stay, retries waiting out
their backoff among them, and so does a paused queue's backlog. For a cron
or batch step that works off what is due and ends.`

// runActivity starts the process's Activity: its row in the processes
// table and its per-minute counts. stop ends it, flushing once more and
// removing the row. A driver that keeps no activity gives a nil Activity
// and a stop that does nothing.
func runActivity(ctx context.Context, q *queue.Queue, log *slog.Logger) (*queue.Activity, func(), error) {
	act, err := queue.NewActivity(q, queue.ActivityConfig{Logger: log})
	if errors.Is(err, queue.ErrUnsupported) {
		log.Warn("dbq: the driver keeps no activity; the dashboard will not list this worker", "err", err)
		return nil, func() {}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	// Its own context: the flusher outlives the signal that starts the
	// worker's drain, to count the drained jobs too.
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = act.Run(actx)
	}()
	return act, func() { cancel(); <-done }, nil
}

// checkWorkFlags refuses values the worker would take for "default" (0) or
// could not use.
func checkWorkFlags(concurrency int, lease, shutdownTimeout, poll time.Duration) error {
	if concurrency < 1 {
		return fmt.Errorf("--concurrency %d: want at least 1", concurrency)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"lease", lease}, {"shutdown-timeout", shutdownTimeout}, {"poll", poll}} {
		if d.v <= 0 {
			return fmt.Errorf("--%s %v: want a duration above 0", d.flag, d.v)
		}
	}
	return nil
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
