// Command riverbench runs River's insert and work loop with the same job
// count, worker counts and database as `dbq bench`, and prints its rows in
// the same JSON shape, so `make bench` can show dbq, River and the raw-SQL
// floor side by side. Its first row runs River the way River's own
// benchmark (`river bench`) does, with Case "tuned": that is the row dbq's
// ratios use. Every row names its configuration in Strategy.
//
// `riverbench soak [flags]` runs the soak scenarios of package soak on
// River in its tuned configuration instead, with the flags of dbq's soak
// program (scripts/soak-pg.sh).
//
// It lives in a module of its own so that dbq's go.mod never depends on
// River; this module requires dbq (replaced by ../..) for package soak.
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dbqueue/dbq/bench/soak"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// row matches bench.Row's JSON in the dbq module.
type row struct {
	Dialect  string  `json:"dialect"`
	Section  string  `json:"section"`
	Impl     string  `json:"impl"`
	Strategy string  `json:"strategy,omitempty"`
	Case     string  `json:"case"`
	Workers  int     `json:"workers,omitempty"`
	Jobs     int     `json:"jobs,omitempty"`
	Seconds  float64 `json:"seconds,omitempty"`
	PerSec   float64 `json:"per_sec,omitempty"`
	Err      string  `json:"error,omitempty"`
}

type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	worked *atomic.Int64
}

func (w noopWorker) Work(context.Context, *river.Job[noopArgs]) error {
	w.worked.Add(1)
	return nil
}

// setup is one River configuration a drain runs with.
type setup struct {
	clients     int           // River clients sharing one pool
	maxWorkers  int           // per client, on the default queue
	cooldown    time.Duration // FetchCooldown; 0: River's default (100ms)
	poll        time.Duration // FetchPollInterval; 0: River's default (1s)
	insertBatch int           // jobs per insert
	insertMany  bool          // InsertMany, not InsertManyFast
	perCount    bool          // a row per client count, the pool sized by it; else pgxpool's default pool, as the river CLI has
}

// tuned is River's own benchmark configuration, as `river bench`
// (cmd/river/riverbench, unchanged since May 2025) sets it: one client,
// MaxWorkers 2000, FetchCooldown 2ms, FetchPollInterval 20ms, jobs inserted
// with InsertMany in batches of 5000 before the client starts, on a pgxpool
// of default size.
var tuned = setup{clients: 1, maxWorkers: 2000, cooldown: 2 * time.Millisecond, poll: 20 * time.Millisecond,
	insertBatch: 5000, insertMany: true}

// perClient is the configuration of the per-worker-count rows: like dbq
// bench's Workers of Concurrency 100, each River client has MaxWorkers 100
// and River's default fetch timing.
func perClient(clients int, cooldown time.Duration) setup {
	return setup{clients: clients, maxWorkers: 100, cooldown: cooldown, insertBatch: 1000, perCount: true}
}

// TunedCase is the case of the River row that `dbq bench` compares dbq with.
const TunedCase = "tuned"

// String names the settings that shape a drain, the same for every row
// of a per-count setup (the row's workers is the client count). How jobs
// were inserted is the enqueue row's.
func (s setup) String() string {
	if s.perCount {
		def := ""
		if s.cooldown == 0 && s.poll == 0 {
			def = " (River's defaults)"
		}
		return fmt.Sprintf("MaxWorkers %d per client, FetchCooldown %s, FetchPollInterval %s%s",
			s.maxWorkers, cmp.Or(s.cooldown, river.FetchCooldownDefault), cmp.Or(s.poll, river.FetchPollIntervalDefault), def)
	}
	return fmt.Sprintf("%d client, MaxWorkers %d, FetchCooldown %s, FetchPollInterval %s",
		s.clients, s.maxWorkers, cmp.Or(s.cooldown, river.FetchCooldownDefault), cmp.Or(s.poll, river.FetchPollIntervalDefault))
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == "soak" {
		var cfg soak.Config
		fs := flag.NewFlagSet("riverbench soak", flag.ExitOnError)
		cfg.Flags(fs)
		fs.Parse(os.Args[2:])
		err := runSoak(ctx, cfg)
		if ctx.Err() != nil {
			os.Exit(130) // interrupted, as a shell reports it
		}
		if err != nil {
			fatal(err)
		}
		return
	}
	dsn := flag.String("dsn", os.Getenv("DBQ_DSN"), "PostgreSQL DSN (postgres://…)")
	n := flag.Int("n", 100_000, "jobs per drain")
	workers := flag.String("workers", "1,2,4,8,16,32,64", "worker counts: River clients, each with MaxWorkers 100, like dbq bench's Workers of Concurrency 100 (\"\": none)")
	cooldown := flag.Duration("fetch-cooldown", 0, "FetchCooldown of the per-worker-count rows (0: River's default, 100ms)")
	noTuned := flag.Bool("no-tuned", false, "skip the row of River's own benchmark configuration (1 client, MaxWorkers 2000, FetchCooldown 2ms, FetchPollInterval 20ms)")
	flag.Parse()
	var ws []int
	if *workers != "" {
		var err error
		if ws, err = parseInts(*workers); err != nil {
			fatal(err)
		}
	}
	enc := json.NewEncoder(os.Stdout)
	run := func(s setup, r row, enqueueRow bool) {
		r.Dialect, r.Section, r.Impl, r.Jobs, r.Strategy = "postgres", "drain", "river", *n, s.String()
		ins, took, err := drain(ctx, *dsn, *n, s)
		if err != nil {
			r.Err = err.Error()
		} else {
			r.Seconds, r.PerSec = took.Seconds(), float64(*n)/took.Seconds()
		}
		if enqueueRow {
			e := row{Dialect: "postgres", Section: "enqueue", Impl: "river", Strategy: s.insert(),
				Case: fmt.Sprintf("batch=%d", s.insertBatch), Jobs: *n, Err: r.Err}
			if err == nil {
				e.Seconds, e.PerSec = ins.Seconds(), float64(*n)/ins.Seconds()
			}
			enc.Encode(e)
		}
		enc.Encode(r)
		fmt.Fprintf(os.Stderr, "drain   river  %-16s %10.0f jobs/s  %s %s\n", r.Case, r.PerSec, r.Strategy, r.Err)
		if ctx.Err() != nil {
			os.Exit(1)
		}
	}
	if !*noTuned {
		run(tuned, row{Case: TunedCase}, false)
	}
	for i, w := range ws {
		run(perClient(w, *cooldown), row{Case: fmt.Sprintf("workers=%d", w), Workers: w}, i == 0)
	}
}

// drain migrates River into a schema of its own, inserts n jobs as s
// says, works them with s's clients and drops the schema. It returns the
// insert time and the time from Start to the last completion.
func drain(ctx context.Context, dsn string, n int, s setup) (insert, work time.Duration, err error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return 0, 0, err
	}
	if s.perCount {
		// The clients share one pool: keep well under max_connections (100 by default).
		cfg.MaxConns = min(max(int32(s.clients)+4, 16), 40)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	schema, drop, err := migrate(ctx, pool)
	if err != nil {
		return 0, 0, err
	}
	defer func() { err = errors.Join(err, drop()) }()
	drv := riverpgxv5.New(pool)
	wk := river.NewWorkers()
	var worked atomic.Int64
	river.AddWorker(wk, noopWorker{worked: &worked})
	all := make([]*river.Client[pgx.Tx], s.clients)
	for i := range all {
		if all[i], err = river.NewClient(drv, s.config(schema, wk)); err != nil {
			return 0, 0, err
		}
	}
	client := all[0]
	batch := make([]river.InsertManyParams, s.insertBatch)
	for i := range batch {
		batch[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	start := time.Now()
	for done := 0; done < n; done += s.insertBatch {
		b := batch[:min(s.insertBatch, n-done)]
		if s.insertMany {
			_, err = client.InsertMany(ctx, b)
		} else {
			_, err = client.InsertManyFast(ctx, b)
		}
		if err != nil {
			return 0, 0, err
		}
	}
	insert = time.Since(start)

	start = time.Now()
	for _, c := range all {
		if err := c.Start(ctx); err != nil {
			return 0, 0, err
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			c.Stop(ctx)
		}()
	}
	// River drops subscription events when a buffer fills, so completions
	// are counted where they are written: once every job has run, poll the
	// table until every one is completed (River completes in batches).
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	count := "SELECT count(*) FROM " + schema + ".river_job WHERE state = 'completed'"
	last, lastAt := -1, time.Now()
	for {
		if worked.Load() < int64(n) && time.Since(lastAt) < time.Minute {
			select {
			case <-ctx.Done():
				return 0, 0, ctx.Err()
			case <-tick.C:
			}
			continue
		}
		var got int
		if err := pool.QueryRow(ctx, count).Scan(&got); err != nil {
			return 0, 0, err
		}
		if got >= n {
			break
		}
		if got != last {
			last, lastAt = got, time.Now()
		} else if time.Since(lastAt) > time.Minute {
			return 0, 0, fmt.Errorf("stuck at %d of %d completed", got, n)
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-tick.C:
		}
	}
	return insert, time.Since(start), nil
}

// insert names how s inserts.
func (s setup) insert() string {
	if s.insertMany {
		return "InsertMany"
	}
	return "InsertManyFast"
}

// config is the client configuration s describes, on schema.
func (s setup) config(schema string, wk *river.Workers) *river.Config {
	return &river.Config{
		Schema:            schema,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: s.maxWorkers}},
		Workers:           wk,
		FetchCooldown:     s.cooldown,
		FetchPollInterval: s.poll,
		Logger:            quiet(),
	}
}

// migrate makes a schema of River's own and runs River's migrations in it;
// drop drops it again.
func migrate(ctx context.Context, pool *pgxpool.Pool) (schema string, drop func() error, err error) {
	var b [4]byte
	rand.Read(b[:])
	schema = "riverbench_" + hex.EncodeToString(b[:])
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, err
	}
	drop = func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_, err := pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		return err
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema, Logger: quiet()})
	if err == nil {
		_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		return "", nil, errors.Join(err, drop())
	}
	return schema, drop, nil
}

func quiet() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "riverbench:", err)
	os.Exit(1)
}
