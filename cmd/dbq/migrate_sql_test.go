package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
