package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/jackc/pgx/v5"
)

// TestCeilingScript runs `make ceiling`'s script (scripts/ceiling.sh) as
// a user does, on a small table, and checks it prints a positive rate for
// each design; and that it fails, saying which, when a design's SQL fails.
func TestCeilingScript(t *testing.T) {
	dsn := dbtest.DSN(dialect.Postgres)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		dbtest.Unreachable(t, dialect.Postgres, err)
	}
	conn.Close(ctx)

	out, err := exec.CommandContext(ctx, "bash", "../scripts/ceiling.sh", dsn, "3000", "1").CombinedOutput()
	if err != nil {
		t.Fatalf("ceiling.sh: %v\n%s", err, out)
	}
	got := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) != 3 || f[1] != "1" {
			t.Fatalf("line %q: want design, 1 client, jobs/s\n%s", line, out)
		}
		n, err := strconv.Atoi(f[2])
		if err != nil || n <= 0 {
			t.Fatalf("line %q: jobs/s is not a positive number\n%s", line, out)
		}
		got[f[0]] = n
	}
	for _, design := range []string{"floor", "advisory", "skiplocked"} {
		if got[design] == 0 {
			t.Errorf("no row for %s:\n%s", design, out)
		}
	}

	// A copy whose SKIP LOCKED script names a column that does not exist.
	dir := t.TempDir()
	for _, d := range []string{"scripts", "bench/ceiling"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile := func(from, to string, edit func(string) string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, []byte(edit(string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	same := func(s string) string { return s }
	copyFile("../scripts/ceiling.sh", filepath.Join(dir, "scripts/ceiling.sh"), same)
	for _, f := range []string{"setup.sql", "floor.sql", "advisory.sql", "skiplocked.sql"} { // the schema is dbq's own (DBQ below)
		edit := same
		if f == "skiplocked.sql" {
			edit = func(s string) string { return strings.Replace(s, "claim_token = 1", "no_such_column = 1", 1) }
		}
		copyFile(filepath.Join("ceiling", f), filepath.Join(dir, "bench/ceiling", f), edit)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(dir, "scripts/ceiling.sh"), dsn, "3000", "1")
	cmd.Env = append(os.Environ(), "DBQ=go -C "+root+" run ./cmd/dbq")
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "pgbench failed for skiplocked") {
		t.Fatalf("a failing design: err %v, output:\n%s", err, out)
	}
	// Either way the script leaves no table behind.
	conn, err = pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left []string
	rows, err := conn.Query(ctx, "SELECT tablename FROM pg_tables WHERE tablename LIKE 'ceiling%'")
	if err != nil {
		t.Fatal(err)
	}
	if left, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("tables left behind after a failed run: %v", left)
	}
}
