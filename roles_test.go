package dbq_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/queue"
)

// TestLeastPrivilege: a role with only SELECT, INSERT, UPDATE and DELETE on
// the dbq tables runs producers, workers (every claim strategy, with
// rescue) and the admin operations; migrating with it fails with an error
// that says migrations need DDL rights.
func TestLeastPrivilege(t *testing.T) {
	for _, c := range []struct {
		d          dialect.Name
		strategies []string
	}{
		{dialect.Postgres, []string{"advisory", "skiplocked"}},
		{dialect.MySQL, []string{""}},
	} {
		t.Run(string(c.d), func(t *testing.T) {
			ctx := context.Background()
			cfg := queue.Config{Prefix: dbtest.UniqueName("role") + "_", Lease: 2 * time.Second, Logger: quietLog}
			p, admin, err := dbq.Migrator(ctx, dbtest.DSN(c.d), cfg)
			if err != nil {
				dbtest.Unreachable(t, c.d, err)
			}
			// Cleanups run last first: the role is dropped (grantDML), then
			// the tables, then admin is closed.
			dbtest.MigrateUp(t, c.d, p, admin, cfg.Names())
			role := strings.TrimSuffix(cfg.Prefix, "_")
			names := cfg.Names()
			tables := []string{names.Qualified(c.d, names.Jobs()), names.Qualified(c.d, names.Prefix+"queues")}
			dsn := grantDML(t, admin, c.d, role, tables)

			for _, s := range c.strategies {
				q, err := dbq.Open(ctx, dsn, dbq.Options{Config: cfg, Strategy: s})
				if err != nil {
					t.Fatalf("open as %s (%s): %v", role, s, err)
				}
				t.Cleanup(func() { q.Close() }) // before the role is dropped
				runAsRole(t, q)
			}

			// Migrating another prefix needs CREATE TABLE, which the role lacks.
			_, db, err := dbq.Migrator(ctx, dsn, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			other := queue.Config{Prefix: cfg.Prefix + "x_"}
			err = migrations.Up(ctx, c.d, db, other.Names())
			if err == nil || !strings.Contains(err.Error(), "needs DDL rights") {
				t.Fatalf("migrate as %s = %v; want an error saying it needs DDL rights", role, err)
			}
		})
	}
}

// grantDML creates a login role with DML on tables only and returns its
// DSN; the role is dropped when the test ends, even when it fails, and a
// drop that fails fails the test. admin must stay open until then.
func grantDML(t *testing.T, admin *sql.DB, d dialect.Name, role string, tables []string) string {
	t.Helper()
	ctx := context.Background()
	exec := func(q string) {
		t.Helper()
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	u, err := url.Parse(dbtest.DSN(d))
	if err != nil {
		t.Fatal(err)
	}
	switch d {
	case dialect.Postgres:
		exec(fmt.Sprintf(`CREATE ROLE %q LOGIN`, role))
		drop(t, admin, fmt.Sprintf(`DROP OWNED BY %q`, role), fmt.Sprintf(`DROP ROLE %q`, role))
		exec(fmt.Sprintf(`GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %q`, strings.Join(tables, ", "), role))
	case dialect.MySQL:
		for _, host := range []string{"%", "localhost", "127.0.0.1"} {
			user := fmt.Sprintf("'%s'@'%s'", role, host)
			exec("CREATE USER " + user)
			drop(t, admin, "DROP USER "+user)
			for _, tb := range tables {
				exec(fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %s", tb, user))
			}
		}
	}
	u.User = url.User(role)
	return u.String()
}

// drop runs stmts on admin at t's cleanup, failing t if one fails.
func drop(t *testing.T, admin *sql.DB, stmts ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, s := range stmts {
			if _, err := admin.ExecContext(ctx, s); err != nil {
				t.Errorf("cleanup: %s: %v", s, err)
			}
		}
	})
}

// runAsRole enqueues, works, pauses, cancels and revives jobs through q.
func runAsRole(t *testing.T, q *queue.Queue) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jobs := make([]queue.NewJob, 40)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: "r", Payload: fmt.Appendf(nil, "%d", i)}
	}
	if _, err := q.Enqueue(ctx, jobs...); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	if _, _, err := q.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "r", DedupeKey: "u"}); err != nil {
		t.Fatalf("enqueue unique: %v", err)
	}
	if err := q.Pause(ctx, "r"); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if err := q.Resume(ctx, "r"); err != nil {
		t.Fatalf("resume: %v", err)
	}
	var done atomic.Int64
	wctx, stop := context.WithCancel(ctx)
	w, err := queue.NewWorker(q, func(_ context.Context, j *queue.Job) error {
		if string(j.Payload) == "0" && j.Attempt == 0 {
			return queue.Permanent(fmt.Errorf("dies once"))
		}
		if done.Add(1) == 40 {
			stop()
		}
		return nil
	}, queue.WorkerConfig{Queue: "r", Concurrency: 4, PollInterval: 20 * time.Millisecond, Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(wctx); err != nil {
		t.Fatalf("worker: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the worker ran %d jobs in a minute, want 40", done.Load())
	}
	revived, err := q.RetryDead(ctx, "r")
	if err != nil || len(revived) != 1 {
		t.Fatalf("retry dead: %v, %v; want one job", revived, err)
	}
	if got, err := q.Cancel(ctx, revived...); err != nil || len(got) != 1 {
		t.Fatalf("cancel: %v, %v", got, err)
	}
	if _, err := q.Stats(ctx); err != nil {
		t.Fatalf("stats: %v", err)
	}
}

var quietLog = slog.New(slog.DiscardHandler)
