package mysql

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/internal/faults"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/queue"
)

// TestHostileNamesChangeNothing: queue names, databases and prefixes built
// to break out of a literal or a quoted identifier — quotes, backticks,
// ';', comments, Unicode look-alikes — are refused with their typed error
// by every entry point, before any statement runs: the victim database's
// tables and rows, and the server's list of databases and tables, are as
// they were.
func TestHostileNamesChangeNothing(t *testing.T) {
	t.Parallel()
	name, dsn := newDatabase(t)
	q, d := openQueueOn(t, dsn, Config{}, true)
	enqueueN(t, q, "victim", 5, "v")
	c := newClaimer(t, q)
	if _, err := c.Claim(context.Background(), "victim", 2); err != nil {
		t.Fatal(err)
	}
	before, oddBefore := mySnapshot(t, name, d), oddServerNames(t)

	faults.RefuseHostileQueues(t, q, c)

	ctx := context.Background()
	for _, id := range faults.HostileIdentifiers {
		for _, cfg := range []queue.Config{{Schema: id}, {Schema: name, Prefix: id}} {
			what := fmt.Sprintf("database %q prefix %q", cfg.Schema, cfg.Prefix)
			_, err := New(d.DB(), Config{Config: cfg})
			wantIdentErr(t, "New with "+what, err)
			wantIdentErr(t, "Migrate with "+what, Migrate(ctx, d.DB(), Config{Config: cfg}))
			_, err = Open(ctx, dsn, Config{Config: cfg})
			wantIdentErr(t, "Open with "+what, err)
			_, err = migrations.NewProvider(ctx, dialect.MySQL, d.DB(), dialect.Names{Schema: cfg.Schema, Prefix: cfg.Prefix})
			wantIdentErr(t, "migrations.NewProvider with "+what, err)
		}
	}

	if after := mySnapshot(t, name, d); after != before {
		t.Errorf("the victim database changed:\nbefore %s\nafter  %s", before, after)
	}
	if oddAfter := oddServerNames(t); oddAfter != oddBefore {
		t.Errorf("names with quotes, spaces or ';' appeared on the server: before %q, after %q", oddBefore, oddAfter)
	}
}

func wantIdentErr(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, queue.ErrInvalidIdentifier) {
		t.Errorf("%s: %v, want ErrInvalidIdentifier", what, err)
	}
}

// mySnapshot describes database db: its tables, and every row of the
// jobs table with a digest of its payload.
func mySnapshot(t *testing.T, db string, d *Driver) string {
	t.Helper()
	var tables, rows string
	err := admin(t).QueryRow(`SELECT COALESCE(GROUP_CONCAT(table_name ORDER BY table_name), '')
		FROM information_schema.tables WHERE table_schema = ?`, db).Scan(&tables)
	if err != nil {
		t.Fatalf("tables: %v", err)
	}
	err = d.DB().QueryRow(`SELECT COALESCE(GROUP_CONCAT(CONCAT_WS('|', id, HEX(queue), HEX(state), attempt, MD5(payload)) ORDER BY id), '')
		FROM ` + d.stmts.jobsTable).Scan(&rows)
	if err != nil {
		t.Fatalf("rows: %v", err)
	}
	return tables + " / " + rows
}

// oddServerNames lists databases and tables whose names hold a character
// no valid identifier has.
func oddServerNames(t *testing.T) string {
	t.Helper()
	var s string
	err := admin(t).QueryRow(`SELECT COALESCE(GROUP_CONCAT(CONCAT(table_schema, '.', table_name) ORDER BY 1), '')
		FROM information_schema.tables
		WHERE table_schema NOT IN ('information_schema', 'performance_schema', 'mysql', 'sys')
		AND (table_schema REGEXP '[^A-Za-z0-9_]' OR table_name REGEXP '[^A-Za-z0-9_]')`).Scan(&s)
	if err != nil {
		t.Fatalf("information_schema.tables: %v", err)
	}
	return s
}

// TestOddButValidNames: identifiers that are valid but odd — mixed case
// (database and table names are case-sensitive on Linux), a leading
// underscore, the longest prefix — and queue names that look like SQL work
// end to end, migrations included (twice: the second finds the first), and
// the tables carry exactly the names asked for.
func TestOddButValidNames(t *testing.T) {
	t.Parallel()
	a := admin(t)
	db := dbtest.UniqueName("Odd_Db")
	t.Cleanup(func() {
		if _, err := a.Exec("DROP DATABASE IF EXISTS " + dialect.Quote(dialect.MySQL, db)); err != nil {
			t.Errorf("drop database: %v", err)
		}
	})
	_, dsn := newDatabase(t) // the connection's own database is another one
	for _, prefix := range []string{"Odd_Prefix_", "_", strings.Repeat("p", dialect.MaxPrefixLen)} {
		cfg := Config{Config: queue.Config{Schema: db, Prefix: prefix, Logger: quiet}}
		q, d := openQueueOn(t, dsn, cfg, true)
		if err := Migrate(context.Background(), d.DB(), cfg); err != nil {
			t.Fatalf("second Migrate(database %q, prefix %q): %v", db, prefix, err)
		}
		c := newClaimer(t, q)
		for _, name := range faults.OddQueueNames {
			faults.RoundTrip(t, q, c, name, []byte("payload of "+name), "")
		}
		if _, err := q.Stats(context.Background()); err != nil {
			t.Fatalf("Stats: %v", err)
		}
		var n int
		err := a.QueryRow(`SELECT COUNT(*) FROM information_schema.tables
			WHERE BINARY table_schema = ? AND BINARY table_name IN (?, ?)`, db, prefix+"jobs", prefix+"schema_version").Scan(&n)
		if err != nil || n != 2 {
			t.Fatalf("database %q: found %d of the tables %sjobs, %sschema_version (%v)", db, n, prefix, prefix, err)
		}
	}
}
