package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/integration"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/queue"
	"github.com/pressly/goose/v3"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	integration.Run(t, harness())
}

func harness() integration.Harness {
	return integration.Harness{
		Dialect: string(dialect.SQLite),
		NewQueue: func(t *testing.T, cfg queue.Config, migrate bool) *queue.Queue {
			t.Helper()
			return newTestQueue(t, filepath.Join(t.TempDir(), "dbq.db"), cfg, migrate)
		},
		Migrator: func(t *testing.T, q *queue.Queue) *goose.Provider {
			t.Helper()
			p, err := migrations.NewProvider(context.Background(), dialect.SQLite, driverOf(t, q).DB(), q.Config().Names())
			if err != nil {
				t.Fatalf("migrations.NewProvider: %v", err)
			}
			return p
		},
		// A lease claimer holds no locks between calls; what it holds in
		// the database are the rows claimed under its tokens.
		HeldLocks: func(t *testing.T, c queue.Claimer) []int64 {
			t.Helper()
			return claimedRows(t, c.(*Claimer))
		},
		// A SQLite claimer holds no connection: a dead one is one that
		// stops, leaving its leases to expire.
		Kill: func(t *testing.T, c queue.Claimer) {
			t.Helper()
			sc, ok := c.(*Claimer)
			if !ok {
				t.Fatalf("Kill: %T is not a *sqlite.Claimer", c)
			}
			sc.abandon()
		},
		Leftovers: leftovers,
		InsertRaw: insertRaw,
		Tx:        beginTx,
		UserPool:  userPoolQueue,
	}
}

// beginTx begins a transaction as an application does: on the *sql.DB
// Driver.DB returns (BEGIN IMMEDIATE, from Open's DSN), rolled back at t's
// cleanup unless committed.
func beginTx(t *testing.T, q *queue.Queue) (any, func() error) {
	t.Helper()
	tx, err := driverOf(t, q).DB().BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatalf("BeginTx: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx, tx.Commit
}

// newTestQueue opens the file at path as a Queue, migrated if asked, and
// closes it at t's cleanup.
func newTestQueue(t testing.TB, path string, cfg queue.Config, migrate bool) *queue.Queue {
	t.Helper()
	ctx := context.Background()
	q, err := Open(ctx, path, Config{Config: cfg})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	if migrate {
		if err := Migrate(ctx, driverOf(t, q).DB(), Config{Config: cfg}); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}
	return q
}

func driverOf(t testing.TB, q *queue.Queue) *Driver {
	t.Helper()
	d, ok := q.Driver().(*Driver)
	if !ok {
		t.Fatalf("driver is %T, not *sqlite.Driver", q.Driver())
	}
	return d
}

func openDB(dsn string) (*sql.DB, error) { return sql.Open(DriverName, dsn) }

// leftovers reports what c's queue leaves behind besides its claims: a
// write gate still taken, or SQLite's write lock held by a connection of
// the pool (a transaction left open). It probes the lock from a fresh
// connection that does not wait.
func leftovers(t *testing.T, c queue.Claimer) []string {
	t.Helper()
	d := c.(*Claimer).d
	var out []string
	if len(d.gate) != 0 {
		out = append(out, "write gate taken")
	}
	var seq int
	var name, file string
	if err := d.db.QueryRow("PRAGMA database_list").Scan(&seq, &name, &file); err != nil {
		t.Fatalf("database_list: %v", err)
	}
	probe, err := sql.Open(DriverName, file+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	conn, err := probe.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		return append(out, "write lock held: "+err.Error())
	}
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	return out
}

// claimedRows returns the ids of the rows claimed under the tokens of the
// jobs c holds, sorted.
func claimedRows(t *testing.T, c *Claimer) []int64 {
	t.Helper()
	c.mu.Lock()
	tokens := map[int64]bool{}
	for _, tok := range c.held {
		tokens[tok] = true
	}
	c.mu.Unlock()
	var ids []int64
	for tok := range tokens {
		got, err := dialect.QueryIDs(context.Background(), c.d.db,
			"SELECT id FROM "+c.d.names.Qualified(dialect.SQLite, c.d.names.Jobs())+" WHERE state = 'claimed' AND claim_token = ?", tok)
		if err != nil {
			t.Fatalf("claimed rows: %v", err)
		}
		ids = append(ids, got...)
	}
	slices.Sort(ids)
	return ids
}

// insertRaw inserts a job as a producer does from the sqlite3 shell: times
// are integer microseconds since the Unix epoch.
func insertRaw(t *testing.T, q *queue.Queue, cols map[string]any) {
	t.Helper()
	if at, ok := cols["run_at"].(time.Time); ok {
		cols["run_at"] = at.UnixMicro()
	}
	n := q.Config().Names()
	stmt, args := integration.InsertStatement(n.Qualified(dialect.SQLite, n.Jobs()), cols, func(int) string { return "?" })
	if _, err := driverOf(t, q).DB().ExecContext(context.Background(), stmt, args...); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}
