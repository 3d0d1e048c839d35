package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/queue"
)

// TestMigrateSQL: the dialect comes from --dialect or from the --dsn's
// form, native ones included, with no connection (the hosts here do not
// exist); --dir writes one goose file per version.
func TestMigrateSQL(t *testing.T) {
	t.Setenv("DBQ_DSN", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--dsn", "root:pw@tcp(no.such.host:3306)/app", "migrate", "sql", "--version", "3"}, "ALTER COLUMN run_at SET DEFAULT (UTC_TIMESTAMP(6))"},
		{[]string{"--dsn", "host=no.such.host dbname=app", "--schema", "jobs", "migrate", "sql", "--version", "1"}, `CREATE TABLE "jobs"."dbq_jobs"`},
		{[]string{"--dsn", "server=no.such.host;user id=sa;password=pw", "migrate", "sql", "--version", "1"}, "LOCK_ESCALATION = DISABLE"},
		{[]string{"--prefix", "p_", "migrate", "sql", "--dialect", "sqlite", "--down"}, `DROP TABLE "p_jobs"`},
	} {
		out := mustRun(t, "", c.args...)
		if !strings.Contains(out, c.want) || strings.Contains(out, "+goose") || strings.Contains(out, "pw") {
			t.Errorf("dbq %s:\n%s\nwant plain SQL with %q", strings.Join(c.args, " "), out, c.want)
		}
	}
	dir := filepath.Join(t.TempDir(), "goose")
	mustRun(t, "", "migrate", "sql", "--dialect", "postgres", "--dir", dir)
	files, _ := filepath.Glob(filepath.Join(dir, "0000*_*.sql"))
	if len(files) < 3 {
		t.Fatalf("--dir wrote %v", files)
	}
	b, _ := os.ReadFile(files[0])
	if !strings.HasPrefix(string(b), "-- +goose Up") || !strings.Contains(string(b), "-- +goose Down") {
		t.Errorf("%s is not a goose file:\n%s", files[0], b)
	}
}

// TestMigrateSQLRefuses: --schema with SQLite is refused (its tables are
// never in a schema), and --dir leaves a file with other contents alone
// unless --force, while rewriting the same files is no error.
func TestMigrateSQLRefuses(t *testing.T) {
	t.Setenv("DBQ_DSN", "")
	ctx := context.Background()
	for _, args := range [][]string{
		{"--schema", "s", "migrate", "sql", "--dialect", "sqlite"},
		{"--schema", "s", "--dsn", "sqlite:x.db", "migrate", "sql", "--dir", t.TempDir()},
	} {
		out, err := dbqCmd(ctx, "", args...)
		if !errors.Is(err, queue.ErrInvalidConfig) || !strings.Contains(err.Error(), "SQLite has no schemas") {
			t.Errorf("dbq %s = %v\n%s\nwant ErrInvalidConfig: SQLite has no schemas", strings.Join(args, " "), err, out)
		}
	}
	dir := filepath.Join(t.TempDir(), "goose")
	write := []string{"migrate", "sql", "--dialect", "postgres", "--dir", dir}
	mustRun(t, "", write...)
	mustRun(t, "", write...) // the same files again
	first := filepath.Join(dir, "00001_jobs.sql")
	if err := os.WriteFile(first, []byte("-- edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := dbqCmd(ctx, "", write...)
	if !errors.Is(err, queue.ErrInvalidConfig) || !strings.Contains(err.Error(), first) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("--dir over an edited file = %v\n%s\nwant a refusal naming it and --force", err, out)
	}
	if b, _ := os.ReadFile(first); string(b) != "-- edited\n" {
		t.Fatalf("the refused write changed %s:\n%s", first, b)
	}
	mustRun(t, "", append(write, "--force")...)
	if b, _ := os.ReadFile(first); !strings.HasPrefix(string(b), "-- +goose Up") {
		t.Fatalf("--force did not rewrite %s:\n%s", first, b)
	}
}

// TestMigrateDownToZero: down --to 0 leaves nothing of dbq's tables, its
// version table included, on every database; migrate up starts over.
func TestMigrateDownToZero(t *testing.T) {
	t.Parallel()
	for _, db := range testDBs(t) {
		t.Run(string(db.d), func(t *testing.T) {
			t.Parallel()
			g, q := cliDB(t, db)
			q.Close()
			prefix := g[3]
			out := mustRun(t, "", append(g, "migrate", "down", "--to", "0")...)
			if !strings.Contains(out, "dropped "+prefix+"schema_version") {
				t.Errorf("down --to 0 said:\n%s", out)
			}
			sdb, _, err := dbq.OpenDB(context.Background(), db.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer sdb.Close()
			for _, table := range []string{prefix + "jobs", prefix + "schema_version"} {
				if _, err := sdb.Exec("SELECT 1 FROM " + table); err == nil {
					t.Errorf("%s is still there after down --to 0", table)
				}
			}
			out = mustRun(t, "", append(g, "migrate", "down", "--to", "0")...)
			if !strings.Contains(out, "already at version 0") {
				t.Errorf("a second down --to 0 said:\n%s", out)
			}
			mustRun(t, "", append(g, "migrate", "up", "--no-check")...)
		})
	}
}
