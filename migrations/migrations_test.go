package migrations

import (
	"context"
	"database/sql"
	"io/fs"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	_ "github.com/jackc/pgx/v5/stdlib"
)

func TestVersionsMatchAcrossDialects(t *testing.T) {
	want, err := Versions(dialect.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("no postgres migrations")
	}
	for _, d := range dialect.All {
		got, err := Versions(d)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s versions %v, postgres has %v", d, got, want)
		}
	}
}

func TestFSRendersNames(t *testing.T) {
	for _, d := range dialect.All {
		fsys, err := FS(d, dialect.Names{Schema: "s1", Prefix: "pfx_"})
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		names, _ := fs.Glob(fsys, "*.sql")
		if len(names) == 0 {
			t.Fatalf("%s: nothing rendered", d)
		}
		for _, n := range names {
			b, _ := fs.ReadFile(fsys, n)
			s := string(b)
			if !strings.Contains(s, "+goose Up") || !strings.Contains(s, "+goose Down") {
				t.Errorf("%s/%s: missing goose annotations", d, n)
			}
			if strings.Contains(s, "{{") {
				t.Errorf("%s/%s: unrendered template", d, n)
			}
			// Every migration that runs a statement names at least one
			// table, each with the prefix.
			up, down, err := split(b)
			if err != nil {
				t.Fatalf("%s/%s: %v", d, n, err)
			}
			if (hasStatement(up) || hasStatement(down)) && !strings.Contains(s, "pfx_") {
				t.Errorf("%s/%s: prefix not applied", d, n)
			}
			if strings.Contains(s, "dbq_") {
				t.Errorf("%s/%s: hard-coded table name", d, n)
			}
		}
	}
}

func TestFSRejectsBadNames(t *testing.T) {
	for _, n := range []dialect.Names{
		{Prefix: `x"; DROP TABLE t; --`},
		{Schema: "a b"},
		{Prefix: "ünï_"},
		{Schema: "s]"},
	} {
		if _, err := FS(dialect.Postgres, n); err == nil {
			t.Errorf("%+v: accepted", n)
		}
	}
}

// TestVersionTableName: PostgreSQL gets the version table quoted, since it
// folds unquoted names to lower case; the others get it as before.
func TestVersionTableName(t *testing.T) {
	for _, c := range []struct {
		d    dialect.Name
		n    dialect.Names
		want string
	}{
		{dialect.Postgres, dialect.Names{}, `"dbq_schema_version"`},
		{dialect.Postgres, dialect.Names{Schema: "Odd_S", Prefix: "Odd_"}, `"Odd_S"."Odd_schema_version"`},
		{dialect.MySQL, dialect.Names{Schema: "s", Prefix: "P_"}, "s.P_schema_version"},
		{dialect.MSSQL, dialect.Names{Prefix: "P_"}, "P_schema_version"},
		{dialect.SQLite, dialect.Names{Schema: "ignored", Prefix: "P_"}, "P_schema_version"},
	} {
		store, err := newStore(c.d, c.n.WithDefaults())
		if err != nil {
			t.Fatalf("%s %+v: %v", c.d, c.n, err)
		}
		if got := store.Tablename(); got != c.want {
			t.Errorf("%s %+v: version table %s, want %s", c.d, c.n, got, c.want)
		}
	}
}

// TestPostgresMixedCasePrefix: on PostgreSQL, with no schema configured
// (the tables go where search_path says), prefixes that differ only in
// case migrate up, again, and down as separate sets of tables under
// exactly their names.
func TestPostgresMixedCasePrefix(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema := dbtest.UniqueName("dbq_mig")
	dsn, err := url.Parse(dbtest.DSN(dialect.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("pgx", dsn.String())
	if err == nil {
		err = admin.PingContext(ctx)
	}
	if err != nil {
		dbtest.Unreachable(t, dialect.Postgres, err)
	}
	t.Cleanup(func() { admin.Close() })
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+dialect.Quote(dialect.Postgres, schema)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP SCHEMA "+dialect.Quote(dialect.Postgres, schema)+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	v := dsn.Query()
	v.Set("search_path", schema)
	dsn.RawQuery = v.Encode()
	db, err := sql.Open("pgx", dsn.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables := func() []string {
		t.Helper()
		rows, err := admin.QueryContext(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY 1", schema)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	prefixes := []string{"Mixed_", "mixed_"}
	for _, prefix := range prefixes {
		for range 2 {
			if err := Up(ctx, dialect.Postgres, db, dialect.Names{Prefix: prefix}); err != nil {
				t.Fatalf("prefix %q: %v", prefix, err)
			}
		}
	}
	for _, prefix := range prefixes {
		got := tables()
		for _, want := range []string{prefix + "jobs", prefix + "schema_version"} {
			if !slices.Contains(got, want) {
				t.Fatalf("prefix %q: table %s missing; the schema holds %v", prefix, want, got)
			}
		}
	}
	p, err := NewProvider(ctx, dialect.Postgres, db, dialect.Names{Prefix: "Mixed_"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("down: %v", err)
	}
	got := tables()
	if slices.Contains(got, "Mixed_jobs") || !slices.Contains(got, "mixed_jobs") || !slices.Contains(got, "Mixed_schema_version") {
		t.Fatalf("after prefix Mixed_ went down the schema holds %v", got)
	}
}

// hasStatement reports whether sql holds anything but comments.
func hasStatement(sql string) bool {
	for _, line := range strings.Split(sql, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "--") {
			return true
		}
	}
	return false
}
