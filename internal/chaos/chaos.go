//go:build linux

package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

// QueueName is the queue the harness fills and its workers drain.
const QueueName = "chaos"

// Slack is how long after a fault ends a run of a worker it hit may start
// and still be explained by it: a job claimed before the fault whose
// handler only got to start after it.
const Slack = 2 * time.Second

// Config says what to run. Zero optional fields mean the defaults they
// document.
type Config struct {
	// DSN names the database; its scheme picks the dialect. Required.
	DSN string
	// Bin is the path of the dbq binary the workers run. Required.
	Bin string
	// Prefix is the table prefix of the run's jobs table and ledger
	// (<Prefix>jobs, <Prefix>ledger); unique per run. Required.
	Prefix string
	// Strategy is passed to `dbq --strategy` and to the harness's own
	// queue (PostgreSQL: advisory or skiplocked). Default: the dialect's.
	Strategy string

	// Jobs to enqueue. Default 10,000.
	Jobs int
	// Workers is how many `dbq work` processes run at once. Default 4.
	Workers int
	// Concurrency of each worker (--concurrency; its claim batch too).
	// Default 16.
	Concurrency int
	// Lease of lease-based claimers (--lease). Default 2s.
	Lease time.Duration
	// HandlerDelay is the longest random pause between a run's start and
	// finish rows (--ledger-delay). It paces the drain, so that the faults
	// land while the queue is full, and widens the windows they hit: at
	// most Workers·Concurrency / (HandlerDelay/2) jobs finish per second.
	// Default 400ms.
	HandlerDelay time.Duration

	// Kills, Cuts, Freezes and Restarts are how many faults of each kind
	// to inject. Cuts and Restarts need a server (not SQLite).
	Kills, Cuts, Freezes, Restarts int
	// Freeze is how long a frozen worker stays stopped. Default Lease+1s.
	Freeze time.Duration
	// Timeout bounds the whole run. Default 10 minutes.
	Timeout time.Duration
	// Seed makes the choice of victims and moments repeatable (timing
	// is not). Default: random, logged.
	Seed uint64
	// Logf receives progress lines. Default: none.
	Logf func(format string, args ...any)
	// LogDir, when set, receives each worker's whole log as
	// worker-<n>-<pid>.log, for reading after a failed run. Default: only
	// the last lines of a worker that failed are kept, in the problems.
	LogDir string
	// Keep keeps the tables of a failed run for inspection. Default: they
	// are dropped whatever the outcome.
	Keep bool
}

func (c Config) withDefaults() Config {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.Jobs, 10000)
	def(&c.Workers, 4)
	def(&c.Concurrency, 16)
	if c.Lease == 0 {
		c.Lease = 2 * time.Second
	}
	if c.HandlerDelay == 0 {
		c.HandlerDelay = 400 * time.Millisecond
	}
	if c.Freeze == 0 {
		c.Freeze = c.Lease + time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Minute
	}
	if c.Seed == 0 {
		c.Seed = rand.Uint64()
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

// Report is what a run did and found.
type Report struct {
	Dialect  dialect.Name
	Strategy string
	Seed     uint64

	Jobs, Workers int
	// Kills, Cuts, Freezes and Restarts count the faults injected;
	// ConnectionsCut the server connections the cuts ended.
	Kills, Cuts, ConnectionsCut, Freezes, Restarts int
	// Executions counts runs started (ledger rows), Finished those that
	// finished.
	Executions, Finished int
	// Duplicates counts jobs run more than once; Explained those of them
	// whose runs but one were held by a worker when a fault hit it.
	Duplicates, Explained int
	// Lost counts jobs with no finished run.
	Lost int
	// Left is what the jobs table holds for the queue at the end.
	Left queue.QueueStats
	// Retried counts runs of an attempt past the first: the job had
	// failed, or a lease dialect had taken it back from a holder whose
	// lease expired (which counts as an attempt).
	Retried int
	// Warnings counts the warnings and errors the workers logged, by
	// level and message: claims, result writes and ledger writes retried
	// after errors (the backoff at work), leases lost.
	Warnings map[string]int
	// Reconnect is the longest wait, after a cut, freeze or restart, for
	// a worker it hit to start a run again.
	Reconnect time.Duration
	// Wall is the run's wall time, from the first connection to the end
	// of the check.
	Wall time.Duration
	// Problems lists every check that failed; empty means the run passed.
	Problems []string
}

// OK reports whether every check passed.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// String is the report's figures on one line, then the workers' warnings
// and the problems found.
func (r *Report) String() string {
	var b strings.Builder
	strategy := r.Strategy
	if strategy == "" {
		strategy = "default"
	}
	fmt.Fprintf(&b, "%s (%s claimer, seed %d): jobs %d, workers %d, kills %d, connection cuts %d (%d connections), freezes %d, restarts %d; "+
		"executions %d (%d finished), duplicates %d (%d explained by a fault), lost %d, left ready %d held %d dead %d; "+
		"retried runs %d, longest reconnect %v; wall time %v",
		r.Dialect, strategy, r.Seed, r.Jobs, r.Workers, r.Kills, r.Cuts, r.ConnectionsCut, r.Freezes, r.Restarts,
		r.Executions, r.Finished, r.Duplicates, r.Explained, r.Lost, r.Left.Ready+r.Left.Scheduled, r.Left.Held, r.Left.Dead,
		r.Retried, r.Reconnect.Round(time.Millisecond), r.Wall.Round(time.Millisecond))
	if len(r.Warnings) > 0 {
		b.WriteString("\n  worker warnings:")
		for _, msg := range slices.Sorted(maps.Keys(r.Warnings)) {
			fmt.Fprintf(&b, " %s ×%d;", msg, r.Warnings[msg])
		}
	}
	for _, p := range r.Problems {
		b.WriteString("\n  PROBLEM: " + p)
	}
	return b.String()
}

// harness is one run.
type harness struct {
	cfg     Config
	d       dialect.Name
	names   dialect.Names
	jobs    string // quoted jobs table
	ledger  string // quoted ledger table
	db      *sql.DB
	q       *queue.Queue
	rng     *rand.Rand
	start   time.Time
	workers *fleet
	events  []event

	mu     sync.Mutex
	report Report
}

// problem records a failed check.
func (h *harness) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	h.mu.Lock()
	h.report.Problems = append(h.report.Problems, msg)
	h.mu.Unlock()
	h.logf("PROBLEM: %s", msg)
}

func (h *harness) logf(format string, args ...any) {
	h.cfg.Logf("%6.1fs "+format, append([]any{time.Since(h.start).Seconds()}, args...)...)
}

// Run runs the harness as cfg says and returns its report. The error is
// for a run that could not take place (the database does not answer, the
// schema cannot be made); what the run found is in the report's Problems.
// The run's tables are dropped at the end whatever the outcome (a drop
// that fails is an error), unless the run failed and cfg.Keep asks to keep
// them for inspection: then cfg.Logf names them.
func Run(ctx context.Context, cfg Config) (_ *Report, err error) {
	cfg = cfg.withDefaults()
	if cfg.DSN == "" || cfg.Bin == "" || cfg.Prefix == "" {
		return nil, errors.New("chaos: Config needs DSN, Bin and Prefix")
	}
	d, err := dialect.ParseDSN(cfg.DSN)
	if err != nil {
		return nil, err
	}
	if d == dialect.SQLite && (cfg.Cuts > 0 || cfg.Restarts > 0) {
		return nil, errors.New("chaos: SQLite has no server to cut or restart")
	}
	if cfg.Jobs < 1 || cfg.Workers < 1 || cfg.Concurrency < 1 {
		return nil, errors.New("chaos: Jobs, Workers and Concurrency must be positive")
	}
	// The faults and the drain get cfg.Timeout; the check and the
	// teardown run past it.
	runCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	h := &harness{
		cfg:   cfg,
		d:     d,
		names: dialect.Names{Prefix: cfg.Prefix},
		rng:   rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		start: time.Now(),
	}
	h.report = Report{Dialect: h.d, Strategy: cfg.Strategy, Seed: cfg.Seed, Jobs: cfg.Jobs, Workers: cfg.Workers}
	h.jobs = h.names.Qualified(h.d, h.names.Jobs())
	h.ledger = h.names.Qualified(h.d, cfg.Prefix+"ledger")

	if h.db, err = openDB(cfg.DSN); err != nil {
		return nil, err
	}
	defer h.db.Close()
	if err := h.db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("chaos: connect to %s: %w", dialect.Redact(cfg.DSN), err)
	}
	teardown, err := h.setup(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		h.mu.Lock()
		ok := h.report.OK()
		h.mu.Unlock()
		if terr := teardown(ok && err == nil); terr != nil {
			err = errors.Join(err, terr)
		}
	}()

	ids, payloads, err := h.enqueue(runCtx)
	if err != nil {
		return nil, err
	}
	h.workers = newFleet(h)
	defer h.workers.killAll()
	for range cfg.Workers {
		if _, err := h.workers.start(); err != nil {
			return nil, err
		}
	}
	h.inject(runCtx)
	h.drain(runCtx)
	h.workers.stopAll()
	vctx, vcancel := context.WithTimeout(ctx, 5*time.Minute)
	defer vcancel()
	h.verify(vctx, ids, payloads)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.report.Wall = time.Since(h.start)
	h.report.Warnings = h.workers.warnings()
	r := h.report
	r.Problems = slices.Clone(r.Problems)
	return &r, nil
}

// openDB opens dsn with the driver dbq uses for its dialect.
func openDB(dsn string) (*sql.DB, error) {
	d, err := dialect.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if d == dialect.MSSQL {
		return nil, fmt.Errorf("chaos: no harness for %s", d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, _, err := dbq.OpenDB(ctx, dsn)
	return db, err
}

// setup migrates the jobs table, creates the ledger and opens the queue
// the harness enqueues through. teardown (also what setup runs when it
// fails halfway) drops them, unless the run failed and Config.Keep asks to
// keep them, and returns the drops that failed.
func (h *harness) setup(ctx context.Context) (teardown func(ok bool) error, err error) {
	qcfg := queue.Config{Prefix: h.cfg.Prefix, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	p, mdb, err := dbq.Migrator(ctx, h.cfg.DSN, qcfg)
	if err != nil {
		return nil, err
	}
	teardown = func(ok bool) error {
		if h.q != nil {
			h.q.Close()
		}
		defer mdb.Close()
		if !ok && h.cfg.Keep {
			h.cfg.Logf("kept the tables %s and %s for inspection", h.jobs, h.ledger)
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var errs []error
		if _, err := h.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+h.ledger); err != nil {
			errs = append(errs, fmt.Errorf("chaos: drop ledger: %w", err))
		}
		if _, err := p.DownTo(ctx, 0); err != nil {
			errs = append(errs, fmt.Errorf("chaos: migrate down: %w", err))
		}
		// goose keeps its version table; the run's prefix is never used again.
		if _, err := h.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+h.names.Qualified(h.d, h.names.Versions())); err != nil {
			errs = append(errs, fmt.Errorf("chaos: drop the migration version table: %w", err))
		}
		return errors.Join(errs...)
	}
	fail := func(err error) (func(bool) error, error) { return nil, errors.Join(err, teardown(false)) }
	if _, err := p.Up(ctx); err != nil {
		return fail(fmt.Errorf("chaos: migrate: %w", err))
	}
	for _, stmt := range ledgerDDL(h.d, h.ledger, h.cfg.Prefix+"ledger_pid") {
		if _, err := h.db.ExecContext(ctx, stmt); err != nil {
			return fail(fmt.Errorf("chaos: create ledger: %w", err))
		}
	}
	h.q, err = dbq.Open(ctx, h.cfg.DSN, dbq.Options{Config: qcfg, Strategy: h.cfg.Strategy})
	if err != nil {
		return fail(err)
	}
	return teardown, nil
}

// enqueue adds the jobs, payload "chaos-<i>", and returns their ids and
// payloads by id.
func (h *harness) enqueue(ctx context.Context) ([]int64, map[int64]string, error) {
	ids := make([]int64, 0, h.cfg.Jobs)
	payloads := make(map[int64]string, h.cfg.Jobs)
	const batch = 1000
	for i := 0; i < h.cfg.Jobs; i += batch {
		n := min(batch, h.cfg.Jobs-i)
		jobs := make([]queue.NewJob, n)
		for k := range jobs {
			jobs[k] = queue.NewJob{Queue: QueueName, Payload: fmt.Appendf(nil, "chaos-%d", i+k)}
		}
		got, err := h.q.Enqueue(ctx, jobs...)
		if err != nil {
			return nil, nil, fmt.Errorf("chaos: enqueue: %w", err)
		}
		for k, id := range got {
			ids = append(ids, id)
			payloads[id] = string(jobs[k].Payload)
		}
	}
	h.logf("enqueued %d jobs", len(ids))
	return ids, payloads, nil
}

// remaining counts the queue's jobs in the jobs table, retrying through a
// restarting server until ctx ends.
func (h *harness) remaining(ctx context.Context) (int, error) {
	var n int
	err := h.retry(ctx, func(ctx context.Context) error {
		return h.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+h.jobs+" WHERE queue = "+h.ph(1), QueueName).Scan(&n)
	})
	return n, err
}

// ph is the n-th bind placeholder of the dialect.
func (h *harness) ph(n int) string {
	if h.d == dialect.Postgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

// retry runs fn until it succeeds or ctx ends, each try bounded.
func (h *harness) retry(ctx context.Context, fn func(context.Context) error) error {
	wait := 50 * time.Millisecond
	for {
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := fn(tctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		if !sleep(ctx, wait) {
			return err
		}
		wait = min(2*wait, time.Second)
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// drain waits until the jobs table holds none of the queue's jobs, or the
// run's time is up.
func (h *harness) drain(ctx context.Context) {
	for {
		n, err := h.remaining(ctx)
		if err == nil && n == 0 {
			h.logf("queue drained")
			return
		}
		if h.workers.live() == 0 {
			h.problem("every worker has exited with %d jobs left", n)
			return
		}
		if !sleep(ctx, 500*time.Millisecond) {
			h.problem("the queue did not drain within the run's timeout of %v: %d jobs left (%v)", h.cfg.Timeout, n, err)
			return
		}
	}
}
