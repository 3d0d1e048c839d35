package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/move"
	"github.com/dbqueue/dbq/queue"
)

// TestMoveCommand: dbq move between two SQLite files — refusing bad input
// before it moves anything, a dry run, a real run with --migrate, and the
// JSON report.
func TestMoveCommand(t *testing.T) {
	dir := t.TempDir()
	from, to := "sqlite:"+filepath.Join(dir, "from.db"), "sqlite:"+filepath.Join(dir, "to.db")
	mustRun(t, "", "--dsn", from, "migrate", "up")
	for i := range 30 {
		q := []string{"a", "b", "c"}[i%3]
		mustRun(t, fmt.Sprintf("job %d", i), "--dsn", from, "enqueue", "--queue", q)
	}
	ctx := context.Background()

	_, err := dbqCmd(ctx, "", "move", "--from", from, "--to", from)
	if !errors.Is(err, move.ErrSameDatabase) {
		t.Fatalf("same DSN: %v, want ErrSameDatabase", err)
	}
	out, err := dbqCmd(ctx, "", "move", "--from", from, "--to", to)
	if !errors.Is(err, move.ErrDestinationNotMigrated) || !strings.Contains(err.Error(), "--migrate") {
		t.Fatalf("unmigrated destination: %v\n%s; want ErrDestinationNotMigrated offering --migrate", err, out)
	}
	if _, err := dbqCmd(ctx, "", "move", "--from", from, "--to", to, "--states", "ready,held"); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Fatalf("--states held: %v, want ErrInvalidConfig", err)
	}
	if got := stats(t, []string{"--dsn", from}); got["a"].Ready != 10 {
		t.Fatalf("source after refused moves: %+v", got)
	}

	out = mustRun(t, "", "move", "--from", from, "--to", to, "--migrate", "--dry-run")
	if !strings.Contains(out, "dry run: 30 jobs to move") {
		t.Fatalf("dry run printed:\n%s", out)
	}
	out = mustRun(t, "", "move", "--from", from, "--to", to, "--migrate", "--queue", "a", "--batch", "4")
	if !strings.Contains(out, "moved 10 jobs") || !strings.Contains(out, "verified: both sides match") {
		t.Fatalf("move of queue a printed:\n%s", out)
	}
	out = mustRun(t, "", "move", "--from", from, "--to", to, "--json")
	var rep move.Report
	// Progress lines go to stderr, which this harness shares with stdout.
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rep); err != nil {
		t.Fatalf("--json printed %q: %v", out, err)
	}
	if rep.Moved != 20 || rep.Left != 0 || rep.Source.Checksum != rep.Destination.Checksum || rep.Source.Checksum == "" {
		t.Fatalf("JSON report %+v: want 20 moved, none left, equal checksums", rep)
	}
	src, dst := stats(t, []string{"--dsn", from}), stats(t, []string{"--dsn", to})
	if len(src) != 0 || dst["a"].Ready != 10 || dst["b"].Ready != 10 || dst["c"].Ready != 10 {
		t.Fatalf("after the moves: source %+v, destination %+v", src, dst)
	}
}

// TestMoveTableFlags: --from-prefix picks the source tables among others in
// the same database, and --to-schema with --to-prefix (and --migrate) puts
// the jobs in exactly that schema and prefix on PostgreSQL.
func TestMoveTableFlags(t *testing.T) {
	ctx := context.Background()
	pg := dbtest.DSN(dialect.Postgres)
	admin, _, err := dbq.OpenDB(ctx, pg)
	if err != nil {
		dbtest.Unreachable(t, dialect.Postgres, err)
	}
	schema, prefix := dbtest.UniqueName("mvflags"), dbtest.UniqueName("mvf")+"_"
	// Dropped whatever happens, including tables a broken --to-schema would
	// have put in the default schema.
	t.Cleanup(func() {
		defer admin.Close()
		n := queue.Config{Prefix: prefix}.Names()
		for _, stmt := range []string{
			"DROP SCHEMA IF EXISTS " + dialect.Quote(dialect.Postgres, schema) + " CASCADE",
			"DROP TABLE IF EXISTS " + n.Qualified(dialect.Postgres, n.Jobs()),
			"DROP TABLE IF EXISTS " + n.Qualified(dialect.Postgres, n.Prefix+"queues"),
			"DROP TABLE IF EXISTS " + n.Qualified(dialect.Postgres, n.Versions()),
		} {
			if _, err := admin.ExecContext(context.Background(), stmt); err != nil {
				t.Errorf("cleanup: %s: %v", stmt, err)
			}
		}
	})

	from := "sqlite:" + filepath.Join(t.TempDir(), "from.db")
	def, pre := []string{"--dsn", from}, []string{"--dsn", from, "--prefix", "p_"}
	for _, g := range [][]string{def, pre} {
		mustRun(t, "", append(g, "migrate", "up")...)
	}
	for i := range 3 {
		mustRun(t, fmt.Sprintf("default %d", i), append(def, "enqueue", "--queue", "d")...)
	}
	for i := range 5 {
		mustRun(t, fmt.Sprintf("prefixed %d", i), append(pre, "enqueue", "--queue", "p")...)
	}

	out := mustRun(t, "", "move", "--from", from, "--from-prefix", "p_", "--to", pg,
		"--to-schema", schema, "--to-prefix", prefix, "--migrate")
	if !strings.Contains(out, "moved 5 jobs") || !strings.Contains(out, "verified: both sides match") {
		t.Fatalf("move printed:\n%s", out)
	}
	got := stats(t, []string{"--dsn", pg, "--schema", schema, "--prefix", prefix})
	if len(got) != 1 || got["p"].Ready != 5 {
		t.Fatalf("destination %s.%sjobs holds %+v; want the 5 jobs of queue p", schema, prefix, got)
	}
	if src := stats(t, pre); len(src) != 0 {
		t.Fatalf("source p_ tables still hold %+v", src)
	}
	if src := stats(t, def); len(src) != 1 || src["d"].Ready != 3 {
		t.Fatalf("source default tables hold %+v; want their 3 jobs untouched", src)
	}
}
