package postgres

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The package's tests share one pool: each test works in a schema of its
// own, so a pool is all they share, and one pool keeps the package within
// the server's max_connections however many tests run at once.
var shared struct {
	once sync.Once
	pool *pgxpool.Pool
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.pool != nil {
		shared.pool.Close()
	}
	os.Exit(code)
}

// testPool returns the shared pool, ending the test (skip, or fail when
// DBQ_REQUIRE names postgres) when the server does not answer.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	shared.once.Do(func() {
		cfg, err := pgxpool.ParseConfig(dbtest.DSN(dialect.Postgres))
		if err != nil {
			shared.err = err
			return
		}
		cfg.MaxConns = 48
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err == nil {
			err = pool.Ping(ctx)
		}
		if err != nil {
			if pool != nil {
				pool.Close()
			}
			shared.err = err
			return
		}
		shared.pool = pool
	})
	if shared.err != nil {
		dbtest.Unreachable(t, dialect.Postgres, shared.err)
	}
	return shared.pool
}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newSchema returns a fresh schema name, dropped with everything in it at
// t's cleanup. The schema itself is created by the migration.
func newSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	name := dbtest.UniqueName("dbq_pg")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+dialect.Quote(dialect.Postgres, name)+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// newQueue returns a Queue over a fresh schema, migrated if asked, closed
// at t's cleanup (before the schema is dropped).
func newQueue(t testing.TB, cfg Config, migrate bool) *queue.Queue {
	t.Helper()
	pool := testPool(t)
	cfg.Schema = newSchema(t, pool)
	q, err := New(pool, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	if migrate {
		if err := Migrate(testCtx(t), pool, cfg); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}
	return q
}

func driverOf(t testing.TB, q *queue.Queue) *Driver {
	t.Helper()
	d, ok := q.Driver().(*Driver)
	if !ok {
		t.Fatalf("driver is %T, not *postgres.Driver", q.Driver())
	}
	return d
}

func newClaimer(t testing.TB, q *queue.Queue) queue.Claimer {
	t.Helper()
	c, err := q.NewClaimer(testCtx(t))
	if err != nil {
		t.Fatalf("NewClaimer: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func advisoryClaimer(t testing.TB, q *queue.Queue) *AdvisoryClaimer {
	t.Helper()
	c, ok := newClaimer(t, q).(*AdvisoryClaimer)
	if !ok {
		t.Fatal("claimer is not an *AdvisoryClaimer")
	}
	return c
}

func enqueueN(t testing.TB, q *queue.Queue, name string, n int) []int64 {
	t.Helper()
	var ids []int64
	for len(ids) < n {
		batch := make([]queue.NewJob, min(1000, n-len(ids)))
		for i := range batch {
			batch[i] = queue.NewJob{Queue: name, Payload: fmt.Appendf(nil, "job-%d", len(ids)+i)}
		}
		got, err := q.Enqueue(testCtx(t), batch...)
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		ids = append(ids, got...)
	}
	return ids
}

func claim(t testing.TB, c queue.Claimer, name string, n int) []*queue.Job {
	t.Helper()
	jobs, err := c.Claim(testCtx(t), name, n)
	if err != nil {
		t.Fatalf("Claim(%q, %d): %v", name, n, err)
	}
	return jobs
}

// lockedIDs returns the jobs whose advisory locks the server process pid
// holds, from pg_locks (ids below 2^32 are their own lock keys).
func lockedIDs(t testing.TB, pid uint32) []int64 {
	t.Helper()
	if pid == 0 {
		return nil
	}
	rows, err := testPool(t).Query(testCtx(t), `
		SELECT objid::int8 FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 2 AND granted AND pid = $1
		ORDER BY 1`, int32(pid))
	if err != nil {
		t.Fatalf("pg_locks: %v", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// kill terminates the server process of an advisory claimer's connection
// from another connection, as if its host died, and waits until it is
// gone.
func kill(t testing.TB, c *AdvisoryClaimer) {
	t.Helper()
	pid := c.backendPID()
	if pid == 0 {
		t.Fatal("kill: the claimer has no connection")
	}
	var ok bool
	if err := testPool(t).QueryRow(testCtx(t), "SELECT pg_terminate_backend($1, 5000)", int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
}

func countRows(t testing.TB, q *queue.Queue, where string) int {
	t.Helper()
	var n int
	sql := "SELECT count(*) FROM " + driverOf(t, q).Table()
	if where != "" {
		sql += " WHERE " + where
	}
	if err := testPool(t).QueryRow(testCtx(t), sql).Scan(&n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

var ids = queue.IDs

var leases = queue.Leases
