// Command riverbench runs River's insert and work loop with the same job
// count, worker counts and database as `dbq bench`, and prints its rows in
// the same JSON shape, so `make bench` can show dbq, River and the raw-SQL
// floor side by side. It lives in a module of its own so that dbq's go.mod
// never depends on River.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

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

func main() {
	dsn := flag.String("dsn", os.Getenv("DBQ_DSN"), "PostgreSQL DSN (postgres://…)")
	n := flag.Int("n", 100_000, "jobs per drain")
	workers := flag.String("workers", "1,2,4,8,16,32,64", "worker counts: River clients, each with MaxWorkers 100, like dbq bench's Workers of Concurrency 100")
	cooldown := flag.Duration("fetch-cooldown", 0, "River FetchCooldown (0: River's default, 100ms)")
	flag.Parse()
	ws, err := parseInts(*workers)
	if err != nil {
		fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	enc := json.NewEncoder(os.Stdout)
	for _, w := range ws {
		r := row{Dialect: "postgres", Section: "drain", Impl: "river", Case: fmt.Sprintf("workers=%d", w), Workers: w, Jobs: *n}
		ins, took, err := drain(ctx, *dsn, *n, w, *cooldown)
		if err != nil {
			r.Err = err.Error()
		} else {
			r.Seconds, r.PerSec = took.Seconds(), float64(*n)/took.Seconds()
		}
		if w == ws[0] {
			e := row{Dialect: "postgres", Section: "enqueue", Impl: "river", Case: "batch=1000", Jobs: *n, Err: r.Err}
			if err == nil {
				e.Seconds, e.PerSec = ins.Seconds(), float64(*n)/ins.Seconds()
			}
			enc.Encode(e)
		}
		enc.Encode(r)
		fmt.Fprintf(os.Stderr, "drain   river  %-16s %10.0f jobs/s %s\n", r.Case, r.PerSec, r.Err)
		if ctx.Err() != nil {
			os.Exit(1)
		}
	}
}

// drain migrates River into a schema of its own, inserts n jobs with
// InsertManyFast in batches of 1000, works them with `clients` River
// clients of 100 workers each and drops the schema. It returns the insert
// time and the time from Start to the last completion.
func drain(ctx context.Context, dsn string, n, clients int, cooldown time.Duration) (insert, work time.Duration, err error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return 0, 0, err
	}
	// The clients share one pool: keep well under max_connections (100 by default).
	cfg.MaxConns = min(max(int32(clients)+4, 16), 40)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	var b [4]byte
	rand.Read(b[:])
	schema := "riverbench_" + hex.EncodeToString(b[:])
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return 0, 0, err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, derr := pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); derr != nil && err == nil {
			err = derr
		}
	}()
	drv := riverpgxv5.New(pool)
	m, err := rivermigrate.New(drv, &rivermigrate.Config{Schema: schema, Logger: quiet()})
	if err != nil {
		return 0, 0, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return 0, 0, err
	}
	wk := river.NewWorkers()
	var worked atomic.Int64
	river.AddWorker(wk, noopWorker{worked: &worked})
	all := make([]*river.Client[pgx.Tx], clients)
	for i := range all {
		all[i], err = river.NewClient(drv, &river.Config{
			Schema:        schema,
			Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}},
			Workers:       wk,
			FetchCooldown: cooldown,
			Logger:        quiet(),
		})
		if err != nil {
			return 0, 0, err
		}
	}
	client := all[0]
	batch := make([]river.InsertManyParams, 1000)
	for i := range batch {
		batch[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	start := time.Now()
	for done := 0; done < n; done += 1000 {
		if _, err := client.InsertManyFast(ctx, batch[:min(1000, n-done)]); err != nil {
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
