// Package soak runs a job queue for minutes at a fixed offered rate on a
// PostgreSQL server and reports, per window, what a long run does to it:
// offered and drained rate, backlog, claim latency, dead tuples, table and
// index size and the age of the oldest snapshot (#25). It backs
// `make soak-pg` (scripts/soak-pg.sh), which runs it on a cluster of its
// own with PostgreSQL's defaults, autovacuum on.
//
// The harness knows no queue library: a [Target] makes fresh tables,
// enqueues and works. dbq's target is in bench/soak/dbqsoak, River's in
// bench/river (a module of its own), so both print the same rows.
//
// Scenarios:
//   - steady: Rate jobs/s offered for Steady.
//   - horizon: Rate jobs/s offered; from HoldAt, a REPEATABLE READ
//     transaction that has taken its snapshot stays open for Hold, then
//     After more of the same.
//   - burst: BurstRate jobs/s offered for Burst on freshly migrated tables.
//
// Every scenario starts on freshly migrated tables and drops them when it
// ends.
package soak

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Scenario names, for Config.Scenarios.
const (
	Steady  = "steady"
	Horizon = "horizon"
	Burst   = "burst"
)

// AllScenarios lists every scenario in the order a run takes them.
var AllScenarios = []string{Steady, Horizon, Burst}

// Config is what a soak run does. Flags fills it from command-line flags;
// Defaults fills what is left zero.
type Config struct {
	// DSN is the PostgreSQL server to soak (postgres://…). Required.
	DSN string
	// Scenarios to run. Default AllScenarios.
	Scenarios []string
	// Rate is the jobs/s offered in steady and horizon. Default 3,000.
	Rate int
	// BurstRate is the jobs/s offered in burst. Default 15,000.
	BurstRate int
	// Steady and Burst are those scenarios' lengths. Default 10m and 3m.
	Steady, Burst time.Duration
	// HoldAt, Hold and After shape horizon: the snapshot is taken at
	// HoldAt, held for Hold, and the run goes on After past its release.
	// Default 1m, 5m, 3m.
	HoldAt, Hold, After time.Duration
	// Window is the reporting period. Default 10s.
	Window time.Duration
	// Claimers are the claim strategies a target runs with, each a run of
	// every scenario (dbq: advisory, skiplocked). A target with one
	// configuration ignores them. Default the target's.
	Claimers []string
	// Concurrency is how many jobs a dbq Worker runs at once. Default 32.
	Concurrency int
	// Short shortens every unset duration for a trial run: 1m scenarios,
	// a 30s hold from 15s.
	Short bool
}

// Flags registers the soak flags on fs, filling c. Both soak programs
// (dbq's and River's) take the same flags.
func (c *Config) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.DSN, "dsn", "", "PostgreSQL DSN of the server to soak (postgres://…)")
	fs.Func("scenarios", "comma-separated scenarios: steady, horizon, burst (default all)", func(s string) error {
		c.Scenarios = splitList(s)
		return nil
	})
	fs.IntVar(&c.Rate, "rate", 0, "jobs/s offered in steady and horizon (default 3000)")
	fs.IntVar(&c.BurstRate, "burst-rate", 0, "jobs/s offered in burst (default 15000)")
	fs.DurationVar(&c.Steady, "steady", 0, "length of steady (default 10m; short 1m)")
	fs.DurationVar(&c.Burst, "burst", 0, "length of burst (default 3m; short 1m)")
	fs.DurationVar(&c.HoldAt, "hold-at", 0, "when horizon takes its snapshot (default 1m; short 15s)")
	fs.DurationVar(&c.Hold, "hold", 0, "how long horizon holds it (default 5m; short 30s)")
	fs.DurationVar(&c.After, "after", 0, "how long horizon runs on after the release (default 3m; short 15s)")
	fs.DurationVar(&c.Window, "window", 0, "reporting window (default 10s)")
	fs.Func("claimers", "comma-separated dbq claimers: advisory, skiplocked (default both)", func(s string) error {
		c.Claimers = splitList(s)
		return nil
	})
	fs.IntVar(&c.Concurrency, "concurrency", 0, "dbq Worker concurrency (default 32)")
	fs.BoolVar(&c.Short, "short", false, "short mode: 1m scenarios, a 30s hold")
}

// Defaults returns c with every zero field set to its default.
func (c Config) Defaults() Config {
	orDur := func(d *time.Duration, long, short time.Duration) {
		if *d == 0 {
			*d = long
			if c.Short {
				*d = short
			}
		}
	}
	if len(c.Scenarios) == 0 {
		c.Scenarios = AllScenarios
	}
	if c.Rate == 0 {
		c.Rate = 3000
	}
	if c.BurstRate == 0 {
		c.BurstRate = 15000
	}
	orDur(&c.Steady, 10*time.Minute, time.Minute)
	orDur(&c.Burst, 3*time.Minute, time.Minute)
	orDur(&c.HoldAt, time.Minute, 15*time.Second)
	orDur(&c.Hold, 5*time.Minute, 30*time.Second)
	orDur(&c.After, 3*time.Minute, 15*time.Second)
	orDur(&c.Window, 10*time.Second, 10*time.Second)
	if c.Concurrency == 0 {
		c.Concurrency = 32
	}
	return c
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	switch {
	case c.DSN == "":
		return errors.New("soak: no --dsn")
	case c.Rate < 1 || c.BurstRate < 1 || c.Concurrency < 1:
		return errors.New("soak: --rate, --burst-rate and --concurrency must be at least 1")
	case c.Window < time.Second:
		return errors.New("soak: --window under 1s")
	}
	for _, s := range c.Scenarios {
		if !slices.Contains(AllScenarios, s) {
			return fmt.Errorf("soak: unknown scenario %q (want %s)", s, strings.Join(AllScenarios, ", "))
		}
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Target is a queue library under soak, in one configuration.
type Target interface {
	// Open migrates fresh tables and returns the jobs table as a name
	// PostgreSQL's regclass accepts, for the table statistics.
	Open(ctx context.Context) (jobsTable string, err error)
	// Enqueue inserts n ready no-op jobs, in one statement or a few.
	Enqueue(ctx context.Context, n int) error
	// Work works jobs until ctx ends, reporting every completion written
	// and every claim to p, and returns once its workers have stopped.
	Work(ctx context.Context, p *Probe) error
	// Close drops what Open made.
	Close(ctx context.Context) error
}

// Probe counts what a Target's workers do. Safe for concurrent use.
type Probe struct {
	completed atomic.Int64
	mu        sync.Mutex
	claims    []time.Duration // since the last window
}

// Completed counts n completions written.
func (p *Probe) Completed(n int) { p.completed.Add(int64(n)) }

// Claimed records one claim (a fetch of available jobs) that took d.
func (p *Probe) Claimed(d time.Duration) {
	p.mu.Lock()
	p.claims = append(p.claims, d)
	p.mu.Unlock()
}

// window returns the claims since the last call and forgets them.
func (p *Probe) window() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.claims
	p.claims = make([]time.Duration, 0, len(c))
	return c
}

// Run runs every scenario of cfg on t, labelled by base (Impl, Claimer,
// Settings), and hands each window's row to emit as it ends. A scenario
// that fails emits a row with Err and Run goes on with the next; Run
// returns the first such error, or ctx's.
func Run(ctx context.Context, cfg Config, t Target, base Row, emit func(Row)) error {
	var first error
	for _, name := range cfg.Scenarios {
		row := base
		row.Scenario = name
		err := runScenario(ctx, cfg, name, t, row, emit)
		if err != nil {
			row.Err = err.Error()
			emit(row)
			if first == nil {
				first = err
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return first
}

// plan is one scenario's shape.
type plan struct {
	rate           int
	length         time.Duration
	holdAt, holdTo time.Duration // zero: no hold
}

func planOf(cfg Config, name string) plan {
	switch name {
	case Horizon:
		return plan{rate: cfg.Rate, length: cfg.HoldAt + cfg.Hold + cfg.After, holdAt: cfg.HoldAt, holdTo: cfg.HoldAt + cfg.Hold}
	case Burst:
		return plan{rate: cfg.BurstRate, length: cfg.Burst}
	}
	return plan{rate: cfg.Rate, length: cfg.Steady}
}

func runScenario(ctx context.Context, cfg Config, name string, t Target, base Row, emit func(Row)) (err error) {
	pl := planOf(cfg, name)
	table, err := t.Open(ctx)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		err = errors.Join(err, t.Close(cctx))
	}()
	st, err := newSampler(ctx, cfg.DSN, table)
	if err != nil {
		return err
	}
	defer st.close()

	ctx, cancel := context.WithCancel(ctx)
	var (
		p       Probe
		offered atomic.Int64
		wg      sync.WaitGroup
		errc    = make(chan error, 3)
	)
	// Workers, producer and holder stop before the tables go.
	defer func() { cancel(); wg.Wait() }()
	wg.Go(func() {
		if err := t.Work(ctx, &p); err != nil && ctx.Err() == nil {
			errc <- fmt.Errorf("work: %w", err)
		}
	})
	start := time.Now()
	wg.Go(func() {
		if err := produce(ctx, t, pl.rate, start, &offered); err != nil && ctx.Err() == nil {
			errc <- fmt.Errorf("enqueue: %w", err)
		}
	})
	var holding atomic.Bool
	if pl.holdTo > 0 {
		wg.Go(func() {
			if err := hold(ctx, cfg.DSN, start, pl.holdAt, pl.holdTo, &holding); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("hold: %w", err)
			}
		})
	}

	tick := time.NewTicker(cfg.Window)
	defer tick.Stop()
	var lastOffered, lastDone int64
	lastAt := start
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-errc:
			return err
		case now := <-tick.C:
			off, done := offered.Load(), p.completed.Load()
			secs := now.Sub(lastAt).Seconds()
			row := base
			row.T = now.Sub(start).Round(time.Second).Seconds()
			row.Holding = holding.Load()
			row.Target = float64(pl.rate)
			row.Offered = float64(off-lastOffered) / secs
			row.Drained = float64(done-lastDone) / secs
			row.Backlog = off - done
			row.setClaims(p.window())
			if err := st.sample(ctx, &row); err != nil {
				return fmt.Errorf("statistics: %w", err)
			}
			emit(row)
			lastOffered, lastDone, lastAt = off, done, now
			if now.Sub(start) >= pl.length-cfg.Window/2 {
				return nil
			}
		}
	}
}

// produce enqueues rate jobs/s from start until ctx ends: every 20ms what
// is due, in statements of at most 1,000 jobs. A producer that falls
// behind catches up with larger batches, so offered stays what was asked
// for unless the inserts themselves cannot keep up.
func produce(ctx context.Context, t Target, rate int, start time.Time, offered *atomic.Int64) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var sent int64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		due := int64(time.Since(start).Seconds()*float64(rate)) - sent
		for due > 0 {
			k := min(due, 1000)
			if err := t.Enqueue(ctx, int(k)); err != nil {
				return err
			}
			sent += k
			due -= k
			offered.Add(k)
		}
	}
}

// hold opens, at start+from, a REPEATABLE READ transaction on its own
// connection, takes its snapshot with a first statement, and rolls it back
// at start+to: the MVCC horizon of a long report or an idle-in-transaction
// session.
func hold(ctx context.Context, dsn string, start time.Time, from, to time.Duration, holding *atomic.Bool) error {
	if !sleepUntil(ctx, start.Add(from)) {
		return nil
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
		return err
	}
	holding.Store(true)
	defer holding.Store(false)
	sleepUntil(ctx, start.Add(to))
	return nil
}

// sleepUntil waits for t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
