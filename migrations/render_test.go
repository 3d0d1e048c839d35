package migrations_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/integration"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/mysql"
	"github.com/dbqueue/dbq/postgres"
	"github.com/dbqueue/dbq/sqlite"
)

// catalogs are, per dialect, the catalog queries that describe the tables
// of one schema (database, on MySQL; ignored on SQLite): tables, columns
// with types, defaults and nullability, indexes, constraints. Each row's
// first column is its table; the schema's name is replaced by "S".
var catalogs = map[dialect.Name][]string{
	dialect.Postgres: {
		`SELECT table_name, column_name, data_type, coalesce(character_maximum_length, 0), is_nullable,
			coalesce(column_default, ''), is_identity, coalesce(identity_generation, '')
			FROM information_schema.columns WHERE table_schema = $1`,
		`SELECT tablename, indexname, replace(indexdef, '"' || $1 || '"', 'S') FROM pg_indexes WHERE schemaname = $1`,
		`SELECT c.relname, con.conname, con.contype, pg_get_constraintdef(con.oid)
			FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
			JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1`,
	},
	dialect.MySQL: {
		`SELECT table_name, engine, table_collation FROM information_schema.tables WHERE table_schema = ?`,
		`SELECT table_name, column_name, column_type, is_nullable, coalesce(column_default, ''), extra,
			coalesce(character_set_name, ''), coalesce(collation_name, '')
			FROM information_schema.columns WHERE table_schema = ?`,
		`SELECT table_name, index_name, seq_in_index, column_name, non_unique
			FROM information_schema.statistics WHERE table_schema = ?`,
		`SELECT tc.table_name, tc.constraint_name, tc.constraint_type, coalesce(cc.check_clause, '')
			FROM information_schema.table_constraints tc
			LEFT JOIN information_schema.check_constraints cc
			ON cc.constraint_schema = tc.constraint_schema AND cc.constraint_name = tc.constraint_name
			WHERE tc.table_schema = ?`,
	},
	dialect.SQLite: {
		// The schema argument is unused: a file holds one schema.
		`SELECT tbl_name, type, name, coalesce(sql, '') FROM sqlite_master WHERE ? IS NOT NULL`,
	},
}

// catalog returns the catalog rows of schema, sorted, without the rows of
// the version tables (dbq's and goose's differ by design).
func catalog(t *testing.T, d dialect.Name, db *sql.DB, schema string, n dialect.Names) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, q := range catalogs[d] {
		rows, err := db.QueryContext(ctx, q, schema)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			if table := vals[0].String; table == n.Versions() || table == "goose_db_version" || table == "sqlite_sequence" {
				continue
			}
			parts := make([]string, len(vals))
			for i, v := range vals {
				parts[i] = v.String
			}
			out = append(out, strings.ReplaceAll(strings.Join(parts, " | "), schema, "S"))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	slices.Sort(out)
	return out
}

// TestGooseFilesMatchMigrateUp: the goose files `dbq migrate sql --dir`
// writes, applied by goose, make the same tables — columns, types,
// defaults, indexes, constraints, read from the catalog — as `dbq migrate
// up` (migrations.Up), on PostgreSQL, MySQL/MariaDB and SQLite.
func TestGooseFilesMatchMigrateUp(t *testing.T) {
	for _, d := range []dialect.Name{dialect.Postgres, dialect.MySQL, dialect.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			dbs := make([]*sql.DB, 2)
			names := make([]dialect.Names, 2)
			for i := range dbs {
				names[i] = dialect.Names{Schema: dbtest.UniqueName("dbq_cmp"), Prefix: "cmp_"}
				dbs[i] = openDB(t, d, names[i].Schema)
			}
			if err := migrations.Up(ctx, d, dbs[0], names[0]); err != nil {
				t.Fatalf("migrate up: %v", err)
			}
			if _, err := integration.GooseProvider(t, d, dbs[1], names[1]).Up(ctx); err != nil {
				t.Fatalf("goose up: %v", err)
			}
			up := catalog(t, d, dbs[0], names[0].Schema, names[0])
			goose := catalog(t, d, dbs[1], names[1].Schema, names[1])
			if len(up) == 0 {
				t.Fatal("migrate up made nothing the catalog shows")
			}
			if !slices.Equal(up, goose) {
				t.Errorf("catalogs differ\nmigrate up:\n  %s\ngoose files:\n  %s",
					strings.Join(up, "\n  "), strings.Join(goose, "\n  "))
			}
		})
	}
}

// openDB returns a *sql.DB on dialect d for a test whose tables live in
// schema (a database, on MySQL; a file of its own, on SQLite), dropped with
// everything in it at t's cleanup.
func openDB(t *testing.T, d dialect.Name, schema string) *sql.DB {
	t.Helper()
	var (
		db   *sql.DB
		err  error
		drop string
	)
	switch d {
	case dialect.Postgres:
		db, err = postgres.OpenDB(dbtest.DSN(d))
		drop = "DROP SCHEMA IF EXISTS " + dialect.Quote(d, schema) + " CASCADE"
	case dialect.MySQL:
		db, err = mysql.OpenDB(dbtest.DSN(d))
		drop = "DROP DATABASE IF EXISTS " + dialect.Quote(d, schema)
	case dialect.SQLite:
		db, err = sqlite.OpenDB(filepath.Join(t.TempDir(), "cmp.db"))
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		dbtest.Unreachable(t, d, err)
	}
	t.Cleanup(func() {
		if drop != "" {
			if _, err := db.Exec(drop); err != nil {
				t.Errorf("%s: %v", drop, err)
			}
		}
		db.Close()
	})
	return db
}

// TestWriteDirWritesGooseFiles: one file per version, named as goose
// wants, each with both annotations; the first creates the schema, as
// one statement for goose's parser.
func TestWriteDirWritesGooseFiles(t *testing.T) {
	dir := t.TempDir()
	paths, err := migrations.WriteDir(dir, dialect.Postgres, dialect.Names{Schema: "app", Prefix: "q_"})
	if err != nil {
		t.Fatal(err)
	}
	vs, _ := migrations.Versions(dialect.Postgres)
	if len(paths) != len(vs) {
		t.Fatalf("wrote %d files for %d versions", len(paths), len(vs))
	}
	for i, p := range paths {
		if want := fmt.Sprintf("%05d_", vs[i]); !strings.HasPrefix(filepath.Base(p), want) || filepath.Ext(p) != ".sql" {
			t.Errorf("file %s: want %s<name>.sql", p, want)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if s := string(b); !strings.Contains(s, "-- +goose Up") || !strings.Contains(s, "-- +goose Down") || strings.Contains(s, "{{") {
			t.Errorf("%s: not a rendered goose file:\n%s", p, s)
		}
		if i == 0 && !strings.Contains(string(b), "-- +goose StatementBegin\n"+migrations.SchemaStatement(dialect.Postgres, dialect.Names{Schema: "app"})+";\n-- +goose StatementEnd") {
			t.Errorf("%s does not create the schema", p)
		}
	}
}

// TestSQLPicksVersionAndDirection: one version alone; down in descending
// order; an unknown version refused.
func TestSQLPicksVersionAndDirection(t *testing.T) {
	n := dialect.Names{Prefix: "q_"}
	one, err := migrations.SQL(dialect.MySQL, n, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(one, "CREATE TABLE `q_jobs`") || strings.Contains(one, "q_queues") || strings.Contains(one, "+goose") {
		t.Errorf("version 1 up:\n%s", one)
	}
	down, err := migrations.SQL(dialect.MySQL, n, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	if i, j := strings.Index(down, "DROP TABLE `q_queues`"), strings.Index(down, "DROP TABLE `q_jobs`"); i < 0 || j < 0 || i > j {
		t.Errorf("down, all: want queues dropped before jobs:\n%s", down)
	}
	if _, err := migrations.SQL(dialect.MySQL, n, 999, false); err == nil {
		t.Error("version 999 accepted")
	}
}

// TestSQLiteRebuildKeepsRowsIndexesAndIDs: SQLite's 00003 rebuilds the
// jobs table to give run_at and created_at defaults. Rows, indexes (as
// sqlite_master holds them) and the AUTOINCREMENT counter survive it and
// its down, which takes the defaults away again.
func TestSQLiteRebuildKeepsRowsIndexesAndIDs(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, dialect.SQLite, "")
	n := dialect.Names{Prefix: "rb_"}
	p, err := migrations.NewProvider(ctx, dialect.SQLite, db, n)
	if err != nil {
		t.Fatal(err)
	}
	query := func(q string) []string {
		t.Helper()
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
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
		return out
	}
	const (
		indexes = `SELECT name || ': ' || sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'rb_jobs' ORDER BY name`
		jobs    = `SELECT id || '|' || queue || '|' || hex(payload) || '|' || priority || '|' || run_at || '|' || state || '|' || created_at FROM rb_jobs ORDER BY id`
		seq     = `SELECT CAST(seq AS TEXT) FROM sqlite_sequence WHERE name = 'rb_jobs'`
		columns = `SELECT name || ' ' || type || ' ' || "notnull" || ' ' || coalesce(dflt_value, '-') FROM pragma_table_info('rb_jobs')`
		minimal = `INSERT INTO rb_jobs (queue, payload) VALUES ('q', x'00')`
	)
	if _, err := p.UpTo(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := db.ExecContext(ctx, `INSERT INTO rb_jobs (queue, payload, priority, run_at, created_at) VALUES ('q', ?, ?, ?, ?)`,
			[]byte{byte(i)}, i, 1000+i, 2000+i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM rb_jobs WHERE id = 3`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, minimal); err == nil {
		t.Fatal("version 2 takes an insert of (queue, payload) alone; the test expects it not to")
	}
	wantIndexes, wantJobs, wantCols := query(indexes), query(jobs), query(columns)
	if len(wantIndexes) != 4 || len(wantJobs) != 2 || !slices.Equal(query(seq), []string{"3"}) {
		t.Fatalf("before: indexes %q, jobs %q, seq %q", wantIndexes, wantJobs, query(seq))
	}

	if _, err := p.UpTo(ctx, 3); err != nil {
		t.Fatalf("up to 3: %v", err)
	}
	if got := query(indexes); !slices.Equal(got, wantIndexes) {
		t.Errorf("indexes after the rebuild:\n%q\nwant\n%q", got, wantIndexes)
	}
	if got := query(jobs); !slices.Equal(got, wantJobs) {
		t.Errorf("jobs after the rebuild: %q, want %q", got, wantJobs)
	}
	if got := query(seq); !slices.Equal(got, []string{"3"}) {
		t.Errorf("AUTOINCREMENT counter after the rebuild: %q, want 3", got)
	}
	before := time.Now().UnixMicro()
	res, err := db.ExecContext(ctx, minimal)
	if err != nil {
		t.Fatalf("insert of (queue, payload) alone after 00003: %v", err)
	}
	if id, _ := res.LastInsertId(); id != 4 {
		t.Errorf("new job got id %d, want 4 (id 3 was used)", id)
	}
	var runAt, createdAt int64
	if err := db.QueryRowContext(ctx, `SELECT run_at, created_at FROM rb_jobs WHERE id = 4`).Scan(&runAt, &createdAt); err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixMicro()
	for what, v := range map[string]int64{"run_at": runAt, "created_at": createdAt} {
		if v < before-2000 || v > after+2000 || v%1000 != 0 {
			t.Errorf("default %s = %d, want whole milliseconds between %d and %d", what, v, before, after)
		}
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM rb_jobs WHERE id = 4`); err != nil {
		t.Fatal(err)
	}

	if _, err := p.DownTo(ctx, 2); err != nil {
		t.Fatalf("down to 2: %v", err)
	}
	if got := query(indexes); !slices.Equal(got, wantIndexes) {
		t.Errorf("indexes after down:\n%q\nwant\n%q", got, wantIndexes)
	}
	if got := query(jobs); !slices.Equal(got, wantJobs) {
		t.Errorf("jobs after down: %q, want %q", got, wantJobs)
	}
	if got := query(columns); !slices.Equal(got, wantCols) {
		t.Errorf("columns after down: %q, want version 2's %q", got, wantCols)
	}
	if got := query(seq); !slices.Equal(got, []string{"4"}) {
		t.Errorf("AUTOINCREMENT counter after down: %q, want 4", got)
	}
}
