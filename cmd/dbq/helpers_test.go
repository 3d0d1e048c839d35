package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
)

// testDB is one database the CLI tests run on.
type testDB struct {
	d   dialect.Name
	dsn string
}

// testDBs are SQLite (a file of t's own), PostgreSQL and MySQL.
func testDBs(t *testing.T) []testDB {
	return []testDB{
		{dialect.SQLite, "sqlite:" + filepath.Join(t.TempDir(), "cli.db")},
		{dialect.Postgres, dbtest.DSN(dialect.Postgres)},
		{dialect.MySQL, dbtest.DSN(dialect.MySQL)},
	}
}

// cliDB migrates tables of t's own (a unique prefix) in db and returns the
// global flags that name them and a Queue on them; the tables are dropped
// when t ends. A server that does not answer skips t, unless DBQ_REQUIRE
// names it.
func cliDB(t *testing.T, db testDB) ([]string, *queue.Queue) {
	t.Helper()
	prefix := dbtest.UniqueName("cli") + "_"
	g := []string{"--dsn", db.dsn, "--prefix", prefix}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dropTables(t, db.dsn, prefix)
	if _, err := dbqCmd(ctx, "", append(g, "migrate", "up")...); err != nil {
		if db.d == dialect.SQLite {
			t.Fatalf("migrate up: %v", err)
		}
		dbtest.Unreachable(t, db.d, err)
	}
	return g, openQueue(t, db.dsn, prefix)
}

// dropTables registers, before a test makes the tables of prefix in dsn, a
// cleanup that migrates them down to nothing and drops goose's version
// table, so that even a migration cut off halfway leaves nothing behind;
// it fails t if a drop fails. A database that never answered is left
// alone; a SQLite file is removed.
func dropTables(t *testing.T, dsn, prefix string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
			// A file of the test's own: removing it is the cleanup (a
			// migration down of a file holding 100,000 jobs took over a
			// minute on a loaded machine).
			for _, f := range []string{path, path + "-wal", path + "-shm"} {
				if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("cleanup: %v", err)
				}
			}
			return
		}
		p, db, err := dbq.Migrator(ctx, dsn, queue.Config{Prefix: prefix})
		if err != nil {
			if !dbtest.CannotConnect(err) {
				t.Errorf("cleanup of %s tables: %v", prefix, err)
			}
			return
		}
		defer db.Close()
		if _, err := p.DownTo(ctx, 0); err != nil {
			t.Errorf("cleanup: migrate %s tables down: %v", prefix, err)
		}
		d, err := dialect.ParseDSN(dsn)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		n := dialect.Names{Prefix: prefix}.WithDefaults()
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+n.Qualified(d, n.Versions())); err != nil {
			t.Errorf("cleanup: drop %s: %v", n.Versions(), err)
		}
	})
}

// openQueue opens the queue in dsn (with the table prefix given, or the
// default) until t ends.
func openQueue(t *testing.T, dsn string, prefix ...string) *queue.Queue {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := queue.Config{}
	if len(prefix) > 0 {
		cfg.Prefix = prefix[0]
	}
	q, err := dbq.Open(ctx, dsn, dbq.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// allJobs lists every stored job of queue name, paging through.
func allJobs(t *testing.T, q *queue.Queue, name string) []*queue.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []*queue.Job
	for {
		f := queue.JobFilter{Queue: name, Limit: queue.MaxListLimit}
		if len(out) > 0 {
			f.AfterID = out[len(out)-1].ID
		}
		page, err := q.Jobs(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if len(page) < f.Limit {
			return out
		}
	}
}
