// Command dbqsoak runs the soak harness (package soak) on dbq, one run of
// every scenario per claimer, and prints a row per window: progress lines
// on stderr, JSON lines (--json) or a table on stdout. With --report it
// runs nothing and prints and plots rows other runs wrote, dbq's and
// River's (bench/river: riverbench soak) together. scripts/soak-pg.sh drives it.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/bench/soak"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

func main() {
	var (
		cfg    soak.Config
		asJSON bool
		report string
		plot   string
	)
	fs := flag.NewFlagSet("dbqsoak", flag.ExitOnError)
	cfg.Flags(fs)
	fs.BoolVar(&asJSON, "json", false, "print rows as JSON lines on stdout (default a table at the end)")
	fs.StringVar(&report, "report", "", "comma-separated JSON files to print as one table and plot; runs nothing")
	fs.StringVar(&plot, "plot", "", "with --report: draw each scenario to <plot>-<scenario>.png")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: it exits on a bad flag
	if report != "" {
		if err := printReport(strings.Split(report, ","), plot); err != nil {
			fatal(err)
		}
		return
	}
	cfg = cfg.Defaults()
	if len(cfg.Claimers) == 0 {
		cfg.Claimers = []string{"advisory", "skiplocked"}
	}
	if err := cfg.Validate(); err != nil {
		fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var rows []soak.Row
	enc := json.NewEncoder(os.Stdout)
	emit := func(r soak.Row) {
		fmt.Fprintln(os.Stderr, r)
		if asJSON {
			if err := enc.Encode(r); err != nil {
				log.Fatal(err)
			}
		}
		rows = append(rows, r)
	}
	var failed error
	for _, c := range cfg.Claimers {
		t := &target{dsn: cfg.DSN, strategy: c, concurrency: cfg.Concurrency}
		base := soak.Row{Impl: "dbq", Claimer: c, Settings: t.settings()}
		if err := soak.Run(ctx, cfg, t, base, emit); err != nil {
			failed = errors.Join(failed, fmt.Errorf("%s: %w", c, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	if !asJSON {
		if err := soak.WriteTable(os.Stdout, rows); err != nil {
			log.Fatal(err)
		}
	}
	if ctx.Err() != nil {
		os.Exit(130) // interrupted, as a shell reports it
	}
	if failed != nil {
		fatal(failed)
	}
}

// target is dbq with one claimer: one Worker of the given concurrency,
// otherwise the Worker's defaults.
type target struct {
	dsn         string
	strategy    string
	concurrency int

	cfg  queue.Config
	q    *queue.Queue
	down func(context.Context) error
}

const soakQueue = "soak"

func (t *target) settings() string {
	return fmt.Sprintf("1 Worker, Concurrency %d, BatchSize %d, PollInterval 1s with LISTEN/NOTIFY wakeups; Enqueue of up to 1000 jobs a statement",
		t.concurrency, min(t.concurrency, 1000))
}

func (t *target) Open(ctx context.Context) (string, error) {
	var b [4]byte
	rand.Read(b[:])
	t.cfg = queue.Config{Prefix: "soak" + hex.EncodeToString(b[:]) + "_", Logger: quiet()}
	p, db, err := dbq.Migrator(ctx, t.dsn, t.cfg)
	if err != nil {
		return "", err
	}
	names := t.cfg.Names()
	t.down = func(ctx context.Context) error {
		defer db.Close()
		_, err := p.DownTo(ctx, 0)
		// goose leaves its own version table behind.
		_, err2 := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+names.Qualified(dialect.Postgres, names.Versions()))
		return errors.Join(err, err2)
	}
	if _, err := p.Up(ctx); err != nil {
		return "", errors.Join(err, t.down(context.WithoutCancel(ctx)))
	}
	t.q, err = dbq.Open(ctx, t.dsn, dbq.Options{Config: t.cfg, Strategy: t.strategy})
	if err != nil {
		return "", errors.Join(err, t.down(context.WithoutCancel(ctx)))
	}
	return names.Qualified(dialect.Postgres, names.Jobs()), nil
}

func (t *target) Enqueue(ctx context.Context, n int) error {
	jobs := make([]queue.NewJob, n)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: soakQueue}
	}
	_, err := t.q.Enqueue(ctx, jobs...)
	return err
}

func (t *target) Work(ctx context.Context, p *soak.Probe) error {
	w, err := queue.NewWorker(t.q, func(context.Context, *queue.Job) error { return nil },
		queue.WorkerConfig{Queue: soakQueue, Concurrency: t.concurrency, Hooks: hooks{p: p}})
	if err != nil {
		return err
	}
	return w.Run(ctx)
}

func (t *target) Close(ctx context.Context) error {
	var err error
	if t.q != nil {
		err = t.q.Close()
		t.q = nil
	}
	if t.down != nil {
		err = errors.Join(err, t.down(ctx))
		t.down = nil
	}
	return err
}

// hooks reports a Worker's successful claims and its completions written.
type hooks struct {
	queue.NopHooks
	p *soak.Probe
}

func (h hooks) ClaimDone(_ string, _, _ int, took time.Duration, err error) {
	if err == nil {
		h.p.Claimed(took)
	}
}

func (h hooks) JobEnd(_ context.Context, _ *queue.Job, o queue.Outcome, _ time.Duration, _ error) {
	if o == queue.OutcomeCompleted {
		h.p.Completed(1)
	}
}

func printReport(files []string, plot string) error {
	var rows []soak.Row
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		more, err := soak.ReadJSON(fh)
		fh.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		rows = append(rows, more...)
	}
	if err := soak.WriteTable(os.Stdout, rows); err != nil {
		return err
	}
	if plot == "" {
		return nil
	}
	made, err := plotScenarios(plot, rows)
	for _, f := range made {
		fmt.Println("plot:", f)
	}
	return err
}

func quiet() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "dbqsoak:", err)
	os.Exit(1)
}
