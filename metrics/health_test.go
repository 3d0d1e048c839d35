package metrics_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/metrics"
	"github.com/dbqueue/dbq/postgres"
	"github.com/dbqueue/dbq/queue"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var healthGauges = []string{"dbq_db_horizon_age_seconds", "dbq_db_horizon_xid_age", "dbq_jobs_table_dead_rows", "dbq_jobs_table_live_rows"}

// TestQueueCollectorHealth: over PostgreSQL the collector reports the
// horizon and jobs table gauges, the horizon's age at least as long as a
// snapshot has been held; over SQLite, which reports no health, none of
// them.
func TestQueueCollectorHealth(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := postgres.Config{Config: queue.Config{Schema: dbtest.UniqueName("dbq_metrics"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	q, err := postgres.Open(ctx, dbtest.DSN(dialect.Postgres), cfg)
	if err != nil {
		dbtest.Unreachable(t, dialect.Postgres, err)
	}
	defer q.Close()
	pool := q.Driver().(*postgres.Driver).Pool()
	defer func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+dialect.Quote(dialect.Postgres, cfg.Schema)+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	}()
	if err := postgres.Migrate(ctx, pool, cfg); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	defer conn.Exec(context.Background(), "ROLLBACK") //nolint:errcheck // ends the held snapshot
	if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	const hold = time.Second
	time.Sleep(hold)

	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(metrics.NewQueueCollector(q, metrics.CollectorConfig{})); err != nil {
		t.Fatal(err)
	}
	got := values(t, reg)
	for _, name := range healthGauges {
		if _, ok := got[name+"{}"]; !ok {
			t.Errorf("no %s over PostgreSQL: %v", name, got)
		}
	}
	if age := got["dbq_db_horizon_age_seconds{}"]; age < hold.Seconds() {
		t.Errorf("dbq_db_horizon_age_seconds = %v with a snapshot held %v", age, hold)
	}
	if probs, err := testutil.GatherAndLint(reg); err != nil || len(probs) > 0 {
		t.Errorf("lint: %v %+v", err, probs)
	}

	lite := prometheus.NewPedanticRegistry()
	if err := lite.Register(metrics.NewQueueCollector(openQueue(t), metrics.CollectorConfig{})); err != nil {
		t.Fatal(err)
	}
	got = values(t, lite)
	for _, name := range healthGauges {
		if _, ok := got[name+"{}"]; ok {
			t.Errorf("%s over SQLite, which reports no health", name)
		}
	}
	if got["dbq_queue_stats_up{}"] != 1 {
		t.Errorf("SQLite scrape: %v", got)
	}
}
