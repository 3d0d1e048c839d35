package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
)

// TestMain lets this test binary be a job's supervisor, as dbq is: the
// commands of in-process `dbq work` runs start it again (startJob).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == superviseArg {
		os.Exit(supervise(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// dbqCmd runs the CLI in-process with args and stdin, returning stdout.
func dbqCmd(ctx context.Context, stdin string, args ...string) (string, error) {
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

func mustRun(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := dbqCmd(ctx, stdin, args...)
	if err != nil {
		t.Fatalf("dbq %s: %v\n%s", strings.Join(args, " "), dialect.Redact(err.Error()), out)
	}
	return out
}

// TestDemo runs the demo as a new user would, smaller.
func TestDemo(t *testing.T) {
	t.Setenv("DBQ_DSN", "")
	out := mustRun(t, "", "demo", "--jobs", "2000", "--workers", "2", "--concurrency", "4")
	for _, want := range []string{"jobs: 2000", "ran: 2000", "duplicates: 0", "left in queue: 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// TestCommands drives migrate, enqueue, stats and work against every
// database that answers.
func TestCommands(t *testing.T) {
	dsns := map[dialect.Name]string{
		dialect.SQLite:   "sqlite:" + filepath.Join(t.TempDir(), "cli.db"),
		dialect.Postgres: dbtest.DSN(dialect.Postgres),
		dialect.MySQL:    dbtest.DSN(dialect.MySQL),
	}
	for d, dsn := range dsns {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			prefix := dbtest.UniqueName("cli") + "_"
			g := []string{"--dsn", dsn, "--prefix", prefix}
			dropTables(t, dsn, prefix)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := dbqCmd(ctx, "", append(g, "migrate", "up")...)
			cancel()
			if err != nil {
				if d == dialect.SQLite {
					t.Fatalf("migrate up: %v", err)
				}
				dbtest.Unreachable(t, d, err)
			}
			if out := mustRun(t, "", append(g, "migrate", "status")...); !strings.Contains(out, "applied") {
				t.Errorf("migrate status after up:\n%s", out)
			}
			if out := mustRun(t, "", append(g, "migrate", "up")...); !strings.Contains(out, "already up to date") {
				t.Errorf("second migrate up:\n%s", out)
			}

			mustRun(t, "", append(g, "enqueue", "-q", "cli", "--count", "3", "hello")...)
			mustRun(t, "a\nb\n", append(g, "enqueue", "-q", "cli", "--lines")...)
			mustRun(t, "", append(g, "enqueue", "-q", "bad", "--max-attempts", "1", "x")...)
			st := stats(t, g)
			if st["cli"].Ready != 5 || st["bad"].Ready != 1 {
				t.Fatalf("stats after enqueue: %+v", st)
			}

			// work drains cli (exit 0 completes) and kills bad (exit 3, one attempt).
			work := func(q string, script string) {
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() {
					_, err := dbqCmd(ctx, "", append(g, "work", "-q", q, "--poll", "50ms", "--", "sh", "-c", script)...)
					done <- err
				}()
				deadline := time.Now().Add(30 * time.Second)
				for time.Now().Before(deadline) {
					if s := stats(t, g)[q]; s.Ready == 0 && s.Held == 0 && s.Scheduled == 0 {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				cancel() // SIGTERM's path: graceful drain, exit 0
				if err := <-done; err != nil {
					t.Errorf("work -q %s: %v", q, err)
				}
			}
			work("cli", "cat >/dev/null")
			work("bad", "echo no >&2; exit 3")
			st = stats(t, g)
			if _, ok := st["cli"]; ok {
				t.Errorf("cli queue not drained: %+v", st["cli"])
			}
			if st["bad"].Dead != 1 {
				t.Errorf("bad queue: %+v, want 1 dead", st["bad"])
			}
		})
	}
}

func stats(t *testing.T, g []string) map[string]queue.QueueStats {
	t.Helper()
	out := mustRun(t, "", append(g, "stats", "--json")...)
	var rows []queue.QueueStats
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("stats --json: %v\n%s", err, out)
	}
	m := map[string]queue.QueueStats{}
	for _, r := range rows {
		m[r.Queue] = r
	}
	return m
}
