// Package bench measures a dbq queue against the plainest SQL that does the
// same database work (the "floor"), so a run shows how much the library
// costs over the database itself. It backs `dbq bench`.
//
// The floor deletes ready jobs and records no claim, which no queue that
// keeps its promise can do; what the SQL of each PostgreSQL claim design
// costs on its own, with no library or Go client in the way, is measured
// by the pgbench scripts in bench/ceiling (`make ceiling`). On a 2-core
// machine the SKIP LOCKED design's SQL (an UPDATE to claimed, then the
// delete) drained a third of the floor at the floor's best client count,
// the advisory design's (locks, post-check, delete, unlock) three
// quarters of it or more.
//
// The floor's DELETE reads the claim index from its head, past the
// entries of every job deleted before it until vacuum removes them, so it
// slows as a drain goes on, and the more jobs a drain has the slower it
// is: `dbq bench --sections drain --workers 2` on PostgreSQL 15 (2 cores)
// measured the floor at 129,981 jobs/s for N=100,000, 66,436 for 600,000
// and 41,828 for 1,000,000, and dbq's advisory claimer, which starts each
// claim where the last began, at 39,207, 37,878 and 34,802. Both sides
// were CPU-bound: the floor spent 12.8 us of CPU per job at N=100,000,
// the advisory claimer 40 (server and client together). Compare at the N
// you run.
//
// Every run works on its own tables (a unique prefix) and drops them when
// it ends, so it can point at a shared database.
package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

// Section names, for Config.Sections.
const (
	Enqueue = "enqueue"
	Drain   = "drain"
	Depth   = "depth"
	Pickup  = "pickup"
	Steady  = "steady"
)

// AllSections lists every section in the order a run measures them.
var AllSections = []string{Enqueue, Drain, Depth, Pickup, Steady}

// Config picks what a run measures. The zero value of each field means the
// default it documents.
type Config struct {
	// Sections to run. Default AllSections.
	Sections []string
	// N is the jobs each drain pre-fills. Default 100,000.
	N int
	// Workers are the worker counts drained with. Default 1,2,4,8,16,32,64.
	Workers []int
	// Strategies are the claimers to drain with. Default every strategy the
	// dialect has.
	Strategies []string
	// DrainBatch is the drain Workers' BatchSize, the most jobs one claim
	// takes (1..1000, as queue.WorkerConfig has it), and the floor's jobs
	// per DELETE. Default 100.
	DrainBatch int
	// DrainConcurrency is the drain Workers' Concurrency, the handlers
	// each runs at once. Default DrainBatch: a Worker claims only for its
	// free handler slots, so a batch needs as many.
	DrainConcurrency int
	// Batches are the enqueue batch sizes. Default 1, 100, 1000.
	Batches []int
	// EnqueueJobs is how many jobs each enqueue cell inserts. Default 10,000.
	EnqueueJobs int
	// DepthSizes are the ready-job counts at which the latency of taking
	// one job and finishing it (dbq: Claim and Complete; the floor: one
	// DELETE) is measured.
	// Default 10,000 and 1,000,000.
	DepthSizes []int
	// DepthFuture is how many future-scheduled jobs sit ahead of the ready
	// ones in index order for the last depth cell. Default 1,000,000.
	DepthFuture int
	// Samples is how many claim-and-complete steps or pickups each latency
	// cell times.
	// Default 500.
	Samples int
	// SteadyTotal and SteadyWindow: steady state works SteadyTotal jobs and
	// compares the first and last SteadyWindow. Default 1,000,000 and
	// 100,000.
	SteadyTotal, SteadyWindow int
	// Schema (PostgreSQL, SQL Server) or database (MySQL) to make the
	// tables in. Default the connection's.
	Schema string
	// Logger is the queues' logger. Default warnings and errors to stderr.
	Logger *slog.Logger
	// Progress, when set, gets a line per finished cell.
	Progress io.Writer
}

// Quick returns a configuration small enough for a smoke run of every
// section in well under a minute.
func Quick() Config {
	return Config{
		N: 2000, Workers: []int{1, 4, 16}, Batches: []int{1, 100, 1000}, EnqueueJobs: 2000,
		DepthSizes: []int{1000, 10000}, DepthFuture: 10000, Samples: 100,
		SteadyTotal: 6000, SteadyWindow: 1000,
	}
}

func (c Config) withDefaults(d dialect.Name) Config {
	if len(c.Sections) == 0 {
		c.Sections = AllSections
	}
	if c.N == 0 {
		c.N = 100_000
	}
	if len(c.Workers) == 0 {
		c.Workers = []int{1, 2, 4, 8, 16, 32, 64}
	}
	if len(c.Strategies) == 0 {
		c.Strategies = Strategies(d)
	}
	if c.DrainBatch == 0 {
		c.DrainBatch = defaultDrainBatch
	}
	if c.DrainConcurrency == 0 {
		c.DrainConcurrency = c.DrainBatch
	}
	if len(c.Batches) == 0 {
		c.Batches = []int{1, 100, 1000}
	}
	if c.EnqueueJobs == 0 {
		c.EnqueueJobs = 10_000
	}
	if len(c.DepthSizes) == 0 {
		c.DepthSizes = []int{10_000, 1_000_000}
	}
	if c.DepthFuture == 0 {
		c.DepthFuture = 1_000_000
	}
	if c.Samples == 0 {
		c.Samples = 500
	}
	if c.SteadyTotal == 0 {
		c.SteadyTotal = 1_000_000
	}
	if c.SteadyWindow == 0 {
		c.SteadyWindow = 100_000
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

// defaultDrainBatch is Config.DrainBatch's default.
const defaultDrainBatch = 100

// Strategies returns the claim strategies dialect d has; "" stands for a
// dialect's only one.
func Strategies(d dialect.Name) []string {
	switch d {
	case dialect.Postgres:
		return []string{"advisory", "skiplocked"}
	case dialect.MSSQL:
		return []string{"deletetop", "updlock"}
	}
	return []string{""}
}

// Row is one measurement. Impl is "dbq", "floor" or another library's
// name, so rows of several programs merge into one table.
type Row struct {
	Dialect  string `json:"dialect"`
	Section  string `json:"section"`
	Impl     string `json:"impl"`
	Strategy string `json:"strategy,omitempty"`
	Case     string `json:"case"`              // batch=100, workers=8, ready=10000, first, last…
	Workers  int    `json:"workers,omitempty"` // drain only
	// Batch and Concurrency are a drain's Config.DrainBatch and
	// Config.DrainConcurrency (the floor's rows: its jobs per DELETE).
	Batch       int     `json:"batch,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`
	Jobs        int     `json:"jobs,omitempty"`
	Seconds     float64 `json:"seconds,omitempty"`
	PerSec      float64 `json:"per_sec,omitempty"`
	P50ms       float64 `json:"p50_ms,omitempty"`
	P99ms       float64 `json:"p99_ms,omitempty"`
	Err         string  `json:"error,omitempty"`
}

// Runner runs benchmarks against one database.
type Runner struct {
	dsn  string
	d    dialect.Name
	cfg  Config
	rows []Row
}

// New returns a Runner for the database dsn names.
func New(dsn string, cfg Config) (*Runner, error) {
	d, err := dialect.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return &Runner{dsn: dsn, d: d, cfg: cfg.withDefaults(d)}, nil
}

// Run measures every configured section and returns the rows. A cell that
// fails becomes a row with Err set; Run returns an error only when it
// cannot measure at all (no database, no migration rights).
func (r *Runner) Run(ctx context.Context) ([]Row, error) {
	for _, s := range r.cfg.Sections {
		var err error
		switch s {
		case Enqueue:
			err = r.enqueue(ctx)
		case Drain:
			err = r.drain(ctx)
		case Depth:
			err = r.depth(ctx)
		case Pickup:
			err = r.pickup(ctx)
		case Steady:
			err = r.steady(ctx)
		default:
			return r.rows, fmt.Errorf("bench: unknown section %q (want one of %v)", s, AllSections)
		}
		if err != nil {
			return r.rows, fmt.Errorf("bench %s: %w", s, err)
		}
	}
	return r.rows, nil
}

func (r *Runner) add(row Row) {
	row.Dialect = string(r.d)
	r.rows = append(r.rows, row)
	fmt.Fprintln(r.cfg.Progress, row.String())
}

// String renders the row as one progress line.
func (row Row) String() string {
	s := fmt.Sprintf("%-7s %-6s %-10s %-16s", row.Section, row.Impl, row.Strategy, row.Case)
	if row.PerSec > 0 {
		s += fmt.Sprintf(" %10.0f jobs/s", row.PerSec)
	}
	if row.P50ms > 0 || row.P99ms > 0 {
		s += fmt.Sprintf(" p50 %.2fms p99 %.2fms", row.P50ms, row.P99ms)
	}
	if row.Err != "" {
		s += " error: " + row.Err
	}
	return s
}

// env is one set of fresh tables and the handles on them.
type env struct {
	d     dialect.Name
	names dialect.Names
	table string // quoted, qualified jobs table
	q     *queue.Queue
	db    *sql.DB // for the floor
	down  func(context.Context) error
}

// fresh migrates tables under a new unique prefix and opens a queue with
// strategy on them. close drops the tables.
func (r *Runner) fresh(ctx context.Context, strategy string) (*env, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	cfg := queue.Config{Schema: r.cfg.Schema, Prefix: "bench" + hex.EncodeToString(b[:]) + "_", Logger: r.cfg.Logger}
	p, db, err := dbq.Migrator(ctx, r.dsn, cfg)
	if err != nil {
		return nil, err
	}
	e := &env{d: r.d, names: cfg.Names(), db: db}
	e.table = e.names.Qualified(r.d, e.names.Jobs())
	e.down = func(ctx context.Context) error {
		_, err := p.DownTo(ctx, 0)
		// goose leaves its own version table behind.
		if _, err2 := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+e.names.Qualified(r.d, e.names.Versions())); err == nil {
			err = err2
		}
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		// Undo what a partial migration made.
		return nil, errors.Join(err, e.close(ctx))
	}
	e.q, err = dbq.Open(ctx, r.dsn, dbq.Options{Config: cfg, Strategy: strategy})
	if err != nil {
		e.close(ctx)
		return nil, err
	}
	return e, nil
}

func (e *env) close(ctx context.Context) error {
	if e.q != nil {
		e.q.Close()
	}
	// Drop even when the run was interrupted.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	err := e.down(ctx)
	e.db.Close()
	return err
}

const benchQueue = "bench"

// fill enqueues n jobs through the library in batches of 1000; delay
// schedules them in the future.
func fill(ctx context.Context, q *queue.Queue, n int, delay time.Duration) error {
	batch := make([]queue.NewJob, 0, 1000)
	for done := 0; done < n; {
		k := min(1000, n-done)
		batch = batch[:0]
		for range k {
			batch = append(batch, queue.NewJob{Queue: benchQueue, Delay: delay})
		}
		if _, err := q.Enqueue(ctx, batch...); err != nil {
			return err
		}
		done += k
	}
	return nil
}

// percentile returns the p-quantile (0..1) of sorted durations in ms.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return float64(sorted[i]) / float64(time.Millisecond)
}

func latencyRow(row Row, lat []time.Duration) Row {
	slices.Sort(lat)
	row.Jobs = len(lat)
	row.P50ms = percentile(lat, 0.50)
	row.P99ms = percentile(lat, 0.99)
	return row
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
