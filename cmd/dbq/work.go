package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/dbqueue/dbq/dialect"
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
		scheduleFile    string
		kindRoutes      []string
		noActivity      bool
		exitWhenEmpty   bool
		waitForDB       time.Duration
		ledger          *ledgerOptions
	)
	cmd := &cobra.Command{
		Use:   "work --queue Q [--kind KIND=CMD]... [flags] [-- command [args...]]",
		Short: "Run a command per job, payload on stdin; exit 0 completes the job, anything else retries it",
		Long: `work claims jobs from a queue and runs the command once per job, with the
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
or batch step that works off what is due and ends.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if ledger.table != "" {
				return cobra.NoArgs(cmd, args)
			}
			if len(kindRoutes) > 0 {
				return nil
			}
			return cobra.MinimumNArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkWorkFlags(concurrency, lease, shutdownTimeout, poll); err != nil {
				return err
			}
			routes, err := parseKindRoutes(kindRoutes)
			if err != nil {
				return err
			}
			if len(args) > 0 {
				if err := resolveCommand("the command after --", args[0]); err != nil {
					return err
				}
			}
			cfg := g.config()
			cfg.Lease = lease
			if waitForDB < 0 {
				return fmt.Errorf("%w: --wait-for-db %v < 0", queue.ErrInvalidConfig, waitForDB)
			}
			q, err := g.openWait(cmd.Context(), cfg, waitForDB)
			if err != nil {
				return err
			}
			defer q.Close()
			wcfg := queue.WorkerConfig{
				Queue: name, Concurrency: concurrency, ShutdownTimeout: shutdownTimeout,
				PollInterval: poll, Logger: cfg.Logger, DisableWakeups: noWakeups, ExitWhenEmpty: exitWhenEmpty,
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
			if !noActivity {
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
			if ledger.table != "" {
				l, err := ledger.open(cmd.Context(), g.dsn, g.schema, waitForDB, cfg.Logger)
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
			if scheduleFile != "" {
				stop, err := runSchedules(cmd.Context(), q, scheduleFile, cfg.Logger)
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
		},
	}
	f := cmd.Flags()
	f.StringVarP(&name, "queue", "q", "default", "queue to work")
	f.IntVarP(&concurrency, "concurrency", "c", 10, "commands run at once")
	f.DurationVar(&lease, "lease", queue.DefaultLease, "lease per claim, renewed while the command runs (lease-based claimers)")
	f.DurationVar(&shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGINT or SIGTERM, how long running commands may finish")
	f.DurationVar(&poll, "poll", time.Second, "pause after a claim that found fewer jobs than free slots")
	f.StringVar(&metricsAddr, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics, e.g. :9090")
	f.BoolVar(&noWakeups, "no-wakeups", false, "only poll, even where the database can wake idle workers (PostgreSQL LISTEN/NOTIFY)")
	f.StringVar(&scheduleFile, "schedule", "", "also run the schedules of this crontab-like file (see dbq schedule --help)")
	f.StringArrayVar(&kindRoutes, "kind", nil, "KIND=CMD: run CMD (split at spaces) for jobs of KIND; repeatable")
	f.DurationVar(&waitForDB, "wait-for-db", time.Minute, "at start, keep trying this long while the database does not answer yet (0: fail at once)")
	f.BoolVar(&noActivity, "no-activity", false, "keep no process row and write no per-minute counts (the dashboard's Workers page and charts)")
	f.BoolVar(&exitWhenEmpty, "exit-when-empty", false, "exit 0 once a claim finds no job due and none of this process's is running (later jobs stay)")
	ledger = addLedgerFlags(f)
	return cmd
}

// parseKindRoutes reads --kind KIND=CMD flags into kind → argv. A kind
// holds no "=" (queue.ValidateKind), so the first one ends it. Each
// command must resolve now (exec.LookPath): a route to a missing program
// refuses to start rather than fail every job of its kind.
func parseKindRoutes(flags []string) (map[string][]string, error) {
	routes := make(map[string][]string, len(flags))
	for _, r := range flags {
		kind, command, ok := strings.Cut(r, "=")
		argv := strings.Fields(command)
		if !ok || len(argv) == 0 {
			return nil, fmt.Errorf("%w: --kind %q: want KIND=COMMAND", queue.ErrInvalidConfig, r)
		}
		if err := queue.ValidateKind(kind); err != nil {
			return nil, fmt.Errorf("--kind %q: %w", r, err)
		}
		if _, dup := routes[kind]; dup {
			return nil, fmt.Errorf("%w: --kind %s given twice", queue.ErrInvalidConfig, kind)
		}
		if err := resolveCommand("--kind "+kind, argv[0]); err != nil {
			return nil, err
		}
		routes[kind] = argv
	}
	return routes, nil
}

// resolveCommand checks at start that name, the program of what (a flag
// or "the command after --"), can be run.
func resolveCommand(what, name string) error {
	if _, err := exec.LookPath(name); err != nil {
		return fmt.Errorf("%w: %s: command %q cannot be run: %w", queue.ErrInvalidConfig, what, name, err)
	}
	return nil
}

// routeKinds returns the handler that runs each job's command: its kind's
// route, else the default argv; with neither, the job fails with
// queue.ErrUnknownKind and is retried, never run by the wrong command.
func routeKinds(routes map[string][]string, argv, env []string, force <-chan struct{}, log *slog.Logger) queue.Handler {
	handlers := make(map[string]queue.Handler, len(routes))
	for kind, a := range routes {
		handlers[kind] = commandHandler(a, env, force)
	}
	var fallback queue.Handler
	if len(argv) > 0 {
		fallback = commandHandler(argv, env, force)
	}
	return func(ctx context.Context, j *queue.Job) error {
		if h, ok := handlers[j.Kind]; ok {
			return h(ctx, j)
		}
		if fallback != nil {
			return fallback(ctx, j)
		}
		log.Warn("dbq: no --kind route for the job's kind; it will be retried",
			"kind", j.Kind, "queue", j.Queue, "id", j.ID, "attempt", j.Attempt+1, "max_attempts", j.MaxAttempts)
		return fmt.Errorf("%w: kind %q (routes: --kind)", queue.ErrUnknownKind, j.Kind)
	}
}

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

// killDelay is how long a job's command has between SIGTERM to its
// process group and SIGKILL.
const killDelay = 5 * time.Second

// stderrTail is how much of the end of a command's stderr a run keeps,
// for the job's last error when it fails.
const stderrTail = queue.MaxErrorBytes

// jobProc is a job's running command (startJob).
type jobProc interface {
	// stop sends SIGTERM to the command's process group, and SIGKILL to
	// all it started killDelay later.
	stop()
	// kill sends SIGKILL to the command and all it started, now.
	kill()
	// wait waits for the command's end: nil for exit status 0, an
	// *exitError for any other status.
	wait() error
}

// exitError is a job command's end with a status other than 0, worded as
// os.ProcessState words it ("exit status 3", "signal: killed").
type exitError struct{ msg string }

func (e *exitError) Error() string { return e.msg }

// commandHandler runs argv per job with the payload on stdin, in a process
// group of its own under a supervisor (startJob): a terminal's Ctrl-C
// reaches dbq, which drains, and not the commands, which would die
// mid-job and spend an attempt each. When the job's context ends
// (shutdown timeout, lease lost) the group gets SIGTERM, then SIGKILL
// after killDelay; when force closes (a second Ctrl-C, on which the worker
// is stopped at once: Worker.StopNow), SIGKILL at once, and the job goes
// back with no attempt spent. Whatever the command leaves running is
// killed when it exits, and should dbq die, the supervisor ends the
// command's tree just the same, so no job's processes outlive its run.
// stdout and stderr pass through as they come; only the last stderrTail
// bytes of stderr are kept, for the job's last error.
func commandHandler(argv, env []string, force <-chan struct{}) queue.Handler {
	return func(ctx context.Context, j *queue.Job) error {
		path, err := exec.LookPath(argv[0])
		if err != nil {
			return fmt.Errorf("%s: %w", argv[0], err)
		}
		env := append(env[:len(env):len(env)],
			"DBQ_JOB_ID="+strconv.FormatInt(j.ID, 10),
			"DBQ_JOB_QUEUE="+j.Queue,
			"DBQ_JOB_KIND="+j.Kind,
			"DBQ_JOB_ATTEMPT="+strconv.Itoa(j.Attempt),
		)
		// A pipe of our own rather than exec's: exec would wait for every
		// holder of its write end, which a process that left the group
		// may keep forever.
		pr, pw, err := os.Pipe()
		if err != nil {
			return err
		}
		p, err := startJob(path, argv, env, bytes.NewReader(j.Payload), pw)
		pw.Close()
		if err != nil {
			pr.Close()
			return fmt.Errorf("%s: %w", argv[0], err)
		}
		defer pr.Close()
		stderr := &tail{max: stderrTail}
		copied := make(chan struct{})
		go func() {
			defer close(copied)
			passThrough(os.Stderr, stderr, pr)
		}()

		exited := make(chan struct{})
		var wasForced atomic.Bool
		go func() {
			select {
			case <-exited:
				return
			case <-ctx.Done():
				p.stop()
			case <-force:
				wasForced.Store(true)
				p.kill()
				return
			}
			select {
			case <-exited:
			case <-force:
				wasForced.Store(true)
				p.kill()
			}
		}()
		err = p.wait()
		close(exited)
		select {
		case <-copied:
		case <-time.After(killDelay): // a process that escaped holds stderr
			pr.Close()
			<-copied
		}
		if err == nil {
			return nil
		}
		if wasForced.Load() {
			// Force is followed by Worker.StopNow, which ends the job's
			// context; a run whose context ended is released, so wait for
			// it rather than have the kill count as a failure.
			<-ctx.Done()
			return fmt.Errorf("%s: stopped by a second interrupt: %w", argv[0], err)
		}
		var exit *exitError
		if msg := bytes.TrimSpace(stderr.Bytes()); errors.As(err, &exit) && len(msg) > 0 {
			head := fmt.Sprintf("%s: %v: ", argv[0], err)
			return errors.New(head + lastBytes(string(msg), queue.MaxErrorBytes-len(head)))
		}
		return fmt.Errorf("%s: %w", argv[0], err)
	}
}

// lastBytes returns the end of s, made valid UTF-8, in at most n bytes,
// cut on a character boundary: the job's last error keeps the start of a
// longer message, and what a command printed last matters most.
func lastBytes(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	s = s[len(s)-max(n, 0):]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}

// passThrough copies r to w as it comes, and into t. A failing w (a closed
// stderr) neither stops the copy nor blocks the command.
func passThrough(w io.Writer, t *tail, r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
			_, _ = t.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// jobEnv is the environment of job commands: dbq's own, with the password
// masked in DBQ_DSN. A job has no business with dbq's credentials, and a
// masked DSN fails loudly where an absent one would fall back to
// sqlite:dbq.db.
func jobEnv() []string {
	env := os.Environ()
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if dsn, ok := strings.CutPrefix(kv, "DBQ_DSN="); ok {
			kv = "DBQ_DSN=" + dialect.Redact(dsn)
		}
		out = append(out, kv)
	}
	return out
}

// tail keeps the last max bytes written to it, in at most max bytes of
// memory, however much is written and however (it has no ReadFrom, so
// io.Copy goes through Write).
type tail struct {
	buf []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	if t.buf == nil {
		t.buf = make([]byte, 0, t.max)
	}
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = t.buf[:copy(t.buf, t.buf[over:])]
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// Bytes returns what t holds, oldest first.
func (t *tail) Bytes() []byte { return t.buf }
