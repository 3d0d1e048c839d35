package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbq/bench/soak"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// runSoak runs the soak scenarios on River in its tuned configuration
// (River's own benchmark's), printing progress lines on stderr and the
// rows as JSON lines on stdout, as dbqsoak --json does.
func runSoak(ctx context.Context, cfg soak.Config) error {
	cfg = cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	emit := func(r soak.Row) {
		os.Stderr.WriteString(r.String() + "\n")
		enc.Encode(r)
	}
	t := &soakTarget{dsn: cfg.DSN}
	settings := "River's own benchmark configuration: " + tuned.String() + "; InsertMany of what is due every 20ms, up to 1000 jobs a statement"
	return soak.Run(ctx, cfg, t, soak.Row{Impl: "river", Settings: settings}, emit)
}

// soakTarget is River, tuned, on a schema of its own migrated per scenario.
type soakTarget struct {
	dsn    string
	pool   *pgxpool.Pool
	drop   func() error
	client *river.Client[pgx.Tx]
	probe  probeRef
}

// probeRef lets the driver, made before Work, report to Work's probe.
type probeRef struct{ p *soak.Probe }

func (t *soakTarget) Open(ctx context.Context) (string, error) {
	// pgxpool's default size, as the river CLI's benchmark has it.
	pool, err := pgxpool.New(ctx, t.dsn)
	if err != nil {
		return "", err
	}
	schema, drop, err := migrate(ctx, pool)
	if err != nil {
		pool.Close()
		return "", err
	}
	t.pool, t.drop = pool, drop
	wk := river.NewWorkers()
	river.AddWorker(wk, noopWorker{worked: new(atomic.Int64)})
	drv := timedDriver{Driver: riverpgxv5.New(pool), ref: &t.probe}
	if t.client, err = river.NewClient[pgx.Tx](drv, tuned.config(schema, wk)); err != nil {
		return "", errors.Join(err, t.Close(context.WithoutCancel(ctx)))
	}
	return schema + ".river_job", nil
}

var soakBatch = func() []river.InsertManyParams {
	b := make([]river.InsertManyParams, 1000)
	for i := range b {
		b[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	return b
}()

func (t *soakTarget) Enqueue(ctx context.Context, n int) error {
	_, err := t.client.InsertMany(ctx, soakBatch[:n])
	return err
}

// Work starts the client and counts completions by River's completed
// events, with a channel large enough that none is dropped.
func (t *soakTarget) Work(ctx context.Context, p *soak.Probe) error {
	t.probe.p = p
	events, cancel := t.client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: 200_000, Kinds: []river.EventKind{river.EventKindJobCompleted},
	})
	defer cancel()
	// Not ctx: River hard-stops when its Start context ends; Stop below
	// is the ordinary shutdown.
	if err := t.client.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			return t.client.Stop(sctx)
		case e := <-events:
			if e != nil {
				p.Completed(1)
			}
		}
	}
}

func (t *soakTarget) Close(context.Context) error {
	var err error
	if t.drop != nil {
		err = t.drop()
		t.drop = nil
	}
	if t.pool != nil {
		t.pool.Close()
		t.pool = nil
	}
	return err
}

// timedDriver times River's fetches of available jobs (JobGetAvailable,
// what its producer runs each fetch) as the claims of the soak rows.
type timedDriver struct {
	riverdriver.Driver[pgx.Tx]
	ref *probeRef
}

func (d timedDriver) GetExecutor() riverdriver.Executor {
	return timedExecutor{Executor: d.Driver.GetExecutor(), ref: d.ref}
}

type timedExecutor struct {
	riverdriver.Executor
	ref *probeRef
}

func (e timedExecutor) JobGetAvailable(ctx context.Context, params *riverdriver.JobGetAvailableParams) (*riverdriver.JobGetAvailableResult, error) {
	start := time.Now()
	res, err := e.Executor.JobGetAvailable(ctx, params)
	if err == nil && e.ref.p != nil {
		e.ref.p.Claimed(time.Since(start))
	}
	return res, err
}
