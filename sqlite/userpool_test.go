package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/dbqueue/dbq/queue"
)

// userPoolQueue opens a *sql.DB of the application's own, as New's doc
// says (DSN, then sql.Open), migrates it and returns a Queue made by New on
// it, with a reader of every pooled connection's settings.
func userPoolQueue(t *testing.T, cfg queue.Config) (*queue.Queue, func(*testing.T) []map[string]string) {
	t.Helper()
	const size = 4
	dsn, err := DSN(filepath.Join(t.TempDir(), "app.db"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open(DriverName, dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(size)
	db.SetMaxIdleConns(size)
	t.Cleanup(func() { _ = db.Close() })
	if err := Migrate(context.Background(), db, Config{Config: cfg}); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	q, err := New(db, Config{Config: cfg})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q, func(t *testing.T) []map[string]string {
		t.Helper()
		return poolSessions(t, db, size)
	}
}

// sessionPragmas are what a statement on a SQLite connection can leave
// set for the next user of that connection.
var sessionPragmas = []string{"busy_timeout", "foreign_keys", "query_only", "synchronous", "defer_foreign_keys",
	"recursive_triggers", "temp_store", "cache_size", "locking_mode", "journal_mode", "read_uncommitted", "automatic_index"}

// poolSessions holds n connections of db at once — every idle one among
// them — and reads on each its session pragmas and whether a transaction
// is left open on it (a BEGIN that fails says one is).
func poolSessions(t *testing.T, db *sql.DB, n int) []map[string]string {
	t.Helper()
	ctx := context.Background()
	out := make([]map[string]string, n)
	for i := range n {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, n, err)
		}
		defer c.Close()
		m := map[string]string{}
		for _, p := range sessionPragmas {
			var v string
			if err := c.QueryRowContext(ctx, "PRAGMA "+p).Scan(&v); err != nil {
				t.Fatalf("PRAGMA %s: %v", p, err)
			}
			m[p] = v
		}
		m["open transaction"] = "no"
		if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
			m["open transaction"] = fmt.Sprint("yes: ", err)
		} else if _, err := c.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Fatalf("ROLLBACK: %v", err)
		}
		out[i] = m
	}
	return out
}
