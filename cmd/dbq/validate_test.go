package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
)

// TestBadInputRefused: each mistake fails at once, with a one-line error
// in the words of the flag or command given, and changes nothing.
func TestBadInputRefused(t *testing.T) {
	t.Parallel()
	g, _ := cliDB(t, testDBs(t)[0])
	big := strings.Repeat("a", 10<<20)
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"migrate", "bogus"}, `unknown command "bogus" for "dbq migrate" (want down, sql, status, up)`},
		{"", []string{"dead", "bogus"}, `unknown command "bogus" for "dbq dead"`},
		{"", []string{"migrate", "down", "--to", "99"}, "--to 99: the schema is at version"},
		{"", []string{"bench", "--workers", "0"}, "--workers 0: want at least 1"},
		{"", []string{"bench", "--workers", "4,-2"}, "--workers -2: want at least 1"},
		{"", []string{"bench", "--n", "-1"}, "--n -1: want at least 1"},
		{"", []string{"bench", "--samples", "0"}, "--samples 0: want at least 1"},
		{"", []string{"bench", "--batch", "0"}, "--batch 0: want 1..1000"},
		{"", []string{"bench", "--batch", "1001"}, "--batch 1001: want 1..1000"},
		{"", []string{"bench", "--concurrency", "-1"}, "--concurrency -1: want at least 1"},
		{"", []string{"jobs", "--limit", "-1"}, "--limit -1: want 1..10000"},
		{"", []string{"jobs", "--limit", "0"}, "--limit 0: want 1..10000"},
		{"", []string{"dead", "list", "--limit", "10001"}, "--limit 10001: want 1..10000"},
		{"", []string{"jobs", "--after", "-1"}, "--after -1: want a job id"},
		{"", []string{"move", "--from", "sqlite:a.db", "--to", "sqlite:b.db", "--batch", "0"}, "--batch 0: want 1..5000"},
		{"", []string{"move", "--from", "sqlite:a.db", "--to", "sqlite:b.db", "--batch", "5001"}, "--batch 5001: want 1..5000"},
		{"", []string{"work", "-c", "0", "--", "true"}, "--concurrency 0: want at least 1"},
		{"", []string{"work", "--lease", "0s", "--", "true"}, "--lease 0s: want a duration above 0"},
		{"", []string{"work", "--poll", "-1s", "--", "true"}, "--poll -1s: want a duration above 0"},
		{"", []string{"work", "--shutdown-timeout", "0s", "--", "true"}, "--shutdown-timeout 0s: want a duration above 0"},
		{"", []string{"enqueue", "--count", "0", "x"}, "--count 0: want at least 1"},
		{"", []string{"enqueue", "--max-attempts", "0", "x"}, "--max-attempts 0: want at least 1"},
		{"", []string{"enqueue", "--delay", "-1s", "x"}, "--delay -1s: want 0 or more"},
		{"", []string{"enqueue", "--lines", "--count", "2"}, "--lines reads every payload from stdin"},
		{big, []string{"enqueue"}, "payload too large: the payload on stdin is over the limit of 1048576 bytes; nothing enqueued"},
		{"ok\n" + big + "\n", []string{"enqueue", "--lines"}, "payload too large: line 2 of stdin is over the limit of 1048576 bytes; nothing enqueued"},
		{"", []string{"enqueue", "-q", "a b", "x"}, `job 0: invalid queue name: "a b"`},
		{"", []string{"migrate", "sql", "--dialect", "oracle"}, `--dialect "oracle": want postgres, mysql, tidb, sqlserver or sqlite`},
		{"", []string{"migrate", "sql", "--dialect", "mysql", "--version", "99"}, "mysql has no migration version 99"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := dbqCmd(ctx, c.stdin, append(g, c.args...)...)
		cancel()
		shown := strings.Join(c.args, " ")
		if err == nil {
			t.Errorf("dbq %s succeeded:\n%s", shown, out)
			continue
		}
		if line := errorLine(err); !strings.Contains(line, c.want) || strings.Contains(line, "\n") || strings.Count(line, "dbq:") != 1 {
			t.Errorf("dbq %s: %q, want one line with %q and one dbq: prefix", shown, line, c.want)
		}
	}
	if st := stats(t, g); len(st) != 0 {
		t.Errorf("refused commands stored jobs: %+v", st)
	}
}

// TestErrorLine: an error is printed with one "dbq:" prefix and as the
// driver said it: a MySQL user name in quotes followed by @ is no password.
func TestErrorLine(t *testing.T) {
	t.Parallel()
	g, _ := cliDB(t, testDBs(t)[0])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := dbqCmd(ctx, "", append(g, "--strategy", "bogus", "stats")...)
	if line := errorLine(err); !strings.HasPrefix(line, "dbq: invalid config: sqlite has no claim strategy") {
		t.Errorf("--strategy bogus: %q, want one dbq: prefix", line)
	}
	if _, err := dbqCmd(ctx, "", "--dsn", dbtest.DSN(dialect.MySQL), "migrate", "status"); err != nil {
		dbtest.Unreachable(t, dialect.MySQL, err)
	}
	u := strings.Replace(dbtest.DSN(dialect.MySQL), "root@", "no_such_user_dbq@", 1)
	_, err = dbqCmd(ctx, "", "--dsn", u, "stats")
	if line := errorLine(err); !strings.Contains(line, "'no_such_user_dbq'@") || strings.Contains(line, "xxxxx") || strings.HasPrefix(line, "dbq: dbq:") {
		t.Errorf("unknown MySQL user: %q, want the server's words, once prefixed", line)
	}
}

// TestNoDatabaseCreated: commands other than `migrate up` refuse a SQLite
// file that does not exist, saying so, and leave no file behind; so does
// `dbq stats` with the default DSN in an empty folder.
func TestNoDatabaseCreated(t *testing.T) {
	dir := t.TempDir()
	g := []string{"--dsn", "sqlite:" + filepath.Join(dir, "missing.db")}
	for _, args := range [][]string{
		{"stats"}, {"jobs"}, {"dead", "list"}, {"dead", "retry", "--all"}, {"cancel", "1"}, {"pause", "q"}, {"resume", "q"},
		{"migrate", "status"}, {"migrate", "down"}, {"enqueue", "x"}, {"work", "--", "true"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := dbqCmd(ctx, "", append(g, args...)...)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "missing.db does not exist") {
			t.Errorf("dbq %s on a missing file: %v, want it to say the file does not exist", strings.Join(args, " "), err)
		}
	}
	// move reads its source and, without --migrate, needs its destination
	// migrated: a missing file on either side is refused, not created.
	src := "sqlite:" + filepath.Join(t.TempDir(), "src.db")
	for _, c := range []struct{ from, to, want string }{
		{g[1], src, "move: source: sqlite database " + filepath.Join(dir, "missing.db") + " does not exist"},
		{src, "sqlite:" + filepath.Join(dir, "dst.db"), "the destination is not migrated: sqlite database " + filepath.Join(dir, "dst.db") + " does not exist"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if c.from == src {
			if _, err := dbqCmd(ctx, "", "--dsn", src, "migrate", "up"); err != nil {
				t.Fatal(err)
			}
		}
		_, err := dbqCmd(ctx, "", "move", "--from", c.from, "--to", c.to)
		cancel()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("dbq move --from %s --to %s: %v, want %q", c.from, c.to, err, c.want)
		}
	}
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Errorf("commands on a missing database left %d files: %v", len(files), files)
	}

	empty := t.TempDir()
	t.Chdir(empty)
	t.Setenv("DBQ_DSN", "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := dbqCmd(ctx, "", "stats"); err == nil || !strings.Contains(err.Error(), "dbq.db does not exist") {
		t.Errorf("dbq stats in an empty folder: %v, want it to say dbq.db does not exist", err)
	}
	if files, _ := os.ReadDir(empty); len(files) != 0 {
		t.Errorf("dbq stats in an empty folder made %v", files)
	}
}
