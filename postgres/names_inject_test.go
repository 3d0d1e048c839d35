package postgres

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

// TestHostileNamesChangeNothing: queue names, schemas and prefixes built
// to break out of a literal or a quoted identifier — quotes, ';', comments,
// Unicode look-alikes — are refused with their typed error by every entry
// point, before any statement runs: the victim schema's tables and rows,
// and the database's catalog, are as they were.
func TestHostileNamesChangeNothing(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	ctx := testCtx(t)
	q := newQueue(t, Config{}, true)
	schema := q.Config().Schema
	enqueueN(t, q, "victim", 5)
	c := newClaimer(t, q)
	claim(t, c, "victim", 2)
	before, oddBefore := pgSnapshot(t, q), oddCatalogNames(t)

	faults.RefuseHostileQueues(t, q, c)

	db := SQLDB(pool)
	defer db.Close()
	for _, id := range faults.HostileIdentifiers {
		for _, cfg := range []queue.Config{{Schema: id}, {Schema: schema, Prefix: id}} {
			what := fmt.Sprintf("schema %q prefix %q", cfg.Schema, cfg.Prefix)
			_, err := New(pool, Config{Config: cfg})
			wantIdentErr(t, "New with "+what, err)
			wantIdentErr(t, "Migrate with "+what, Migrate(ctx, pool, Config{Config: cfg}))
			_, err = Open(ctx, dbtest.DSN(dialect.Postgres), Config{Config: cfg})
			wantIdentErr(t, "Open with "+what, err)
			_, err = migrations.NewProvider(ctx, dialect.Postgres, db, dialect.Names{Schema: cfg.Schema, Prefix: cfg.Prefix})
			wantIdentErr(t, "migrations.NewProvider with "+what, err)
		}
	}

	if after := pgSnapshot(t, q); after != before {
		t.Errorf("the victim schema changed:\nbefore %s\nafter  %s", before, after)
	}
	if oddAfter := oddCatalogNames(t); oddAfter != oddBefore {
		t.Errorf("names with quotes, spaces or ';' appeared in the catalog: before %q, after %q", oddBefore, oddAfter)
	}
}

func wantIdentErr(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, queue.ErrInvalidIdentifier) {
		t.Errorf("%s: %v, want ErrInvalidIdentifier", what, err)
	}
}

// pgSnapshot describes q's schema: its tables, and every row of the jobs
// table with a digest of its payload.
func pgSnapshot(t *testing.T, q *queue.Queue) string {
	t.Helper()
	ctx := testCtx(t)
	var tables, rows string
	err := testPool(t).QueryRow(ctx, `SELECT coalesce(string_agg(table_name, ',' ORDER BY table_name), '')
		FROM information_schema.tables WHERE table_schema = $1`, q.Config().Schema).Scan(&tables)
	if err != nil {
		t.Fatalf("tables: %v", err)
	}
	err = testPool(t).QueryRow(ctx, `SELECT coalesce(string_agg(concat_ws('|', id, queue, state, attempt, md5(payload)), ',' ORDER BY id), '')
		FROM `+driverOf(t, q).Table()).Scan(&rows)
	if err != nil {
		t.Fatalf("rows: %v", err)
	}
	return tables + " / " + rows
}

// oddCatalogNames lists schemas and relations whose names hold a character
// no valid identifier has.
func oddCatalogNames(t *testing.T) string {
	t.Helper()
	var s string
	err := testPool(t).QueryRow(testCtx(t), `SELECT coalesce(string_agg(n.nspname || '.' || c.relname, ',' ORDER BY 1), '')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relname ~ '[^A-Za-z0-9_]' OR n.nspname ~ '[^A-Za-z0-9_]'`).Scan(&s)
	if err != nil {
		t.Fatalf("pg_class: %v", err)
	}
	return s
}

// TestOddButValidNames: identifiers that are valid but only work quoted —
// mixed case (PostgreSQL folds unquoted names to lower case), a leading
// underscore, the longest prefix — and queue names that look like SQL
// work end to end, migrations included, and the tables carry exactly the
// names asked for.
func TestOddButValidNames(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := dbtest.UniqueName("odd_schema")
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+dialect.Quote(dialect.Postgres, schema)+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	// Capitals: see TestMixedCaseSchemaMigrates.
	for _, prefix := range []string{"odd__prefix_", "_", strings.Repeat("p", dialect.MaxPrefixLen)} {
		ctx := testCtx(t)
		if err := Migrate(ctx, pool, Config{Config: queue.Config{Schema: schema, Prefix: prefix}}); err != nil {
			t.Fatalf("Migrate(schema %q, prefix %q): %v", schema, prefix, err)
		}
		for _, s := range []Strategy{Advisory, SkipLocked} {
			cfg := Config{Config: queue.Config{Schema: schema, Prefix: prefix}, Strategy: s}
			q, err := New(pool, cfg)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			c := newClaimer(t, q)
			for _, name := range faults.OddQueueNames {
				faults.RoundTrip(t, q, c, name, []byte("payload of "+name), "")
			}
			if _, err := q.Stats(ctx); err != nil {
				t.Fatalf("Stats: %v", err)
			}
			var n int
			err = pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables
				WHERE table_schema = $1 AND table_name IN ($2, $3)`, schema, prefix+"jobs", prefix+"schema_version").Scan(&n)
			if err != nil || n != 2 {
				t.Fatalf("schema %q: found %d of the tables %sjobs, %sschema_version (%v)", schema, n, prefix, prefix, err)
			}
		}
	}
}

// TestMixedCaseSchemaMigrates: a valid identifier with capitals works as
// a schema and a prefix on both strategies, end to end — migrate up (twice:
// the second finds the version table), enqueue, claim, complete, migrate
// down — under exactly that name, and a prefix that differs only in case
// is a separate set of tables with a version table of its own.
func TestMixedCaseSchemaMigrates(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := dbtest.UniqueName("Odd_Schema")
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+dialect.Quote(dialect.Postgres, schema)+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	tables := func(prefix string) int {
		t.Helper()
		var n int
		err := pool.QueryRow(testCtx(t), `SELECT count(*) FROM information_schema.tables
			WHERE table_schema = $1 AND table_name IN ($2, $3)`, schema, prefix+"jobs", prefix+"schema_version").Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, prefix := range []string{"Odd_Prefix_", "odd_prefix_"} {
		cfg := Config{Config: queue.Config{Schema: schema, Prefix: prefix}}
		for range 2 {
			if err := Migrate(testCtx(t), pool, cfg); err != nil {
				t.Fatalf("Migrate(schema %q, prefix %q): %v", schema, prefix, err)
			}
		}
		if n := tables(prefix); n != 2 {
			t.Fatalf("prefix %q: found %d of the 2 tables", prefix, n)
		}
	}
	for _, s := range []Strategy{Advisory, SkipLocked} {
		q, err := New(pool, Config{Config: queue.Config{Schema: schema, Prefix: "Odd_Prefix_"}, Strategy: s})
		if err != nil {
			t.Fatal(err)
		}
		c := newClaimer(t, q)
		faults.RoundTrip(t, q, c, "mixed", []byte("payload"), "Key")
		if err := c.Close(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
	}
	db := SQLDB(pool)
	defer db.Close()
	p, err := migrations.NewProvider(testCtx(t), dialect.Postgres, db, dialect.Names{Schema: schema, Prefix: "Odd_Prefix_"})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := p.GetDBVersion(testCtx(t)); err != nil || v == 0 {
		t.Fatalf("version of the migrated tables: %d, %v", v, err)
	}
	if _, err := p.DownTo(testCtx(t), 0); err != nil {
		t.Fatalf("migrate down: %v", err)
	}
	if n := tables("Odd_Prefix_"); n != 1 {
		t.Fatalf("after migrate down %d tables of prefix Odd_Prefix_ are left, want only the version table", n)
	}
	if n := tables("odd_prefix_"); n != 2 {
		t.Fatalf("migrating prefix Odd_Prefix_ down left %d of prefix odd_prefix_'s 2 tables", n)
	}
}
