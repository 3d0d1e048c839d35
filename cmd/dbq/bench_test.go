package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/bench"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/sqlite"
)

// runBench runs `dbq bench` as built by benchCmd, with args, against dsn.
func runBench(t *testing.T, dsn string, args ...string) (stdout string, err error) {
	t.Helper()
	g := &globals{dsn: dsn, prefix: dialect.DefaultPrefix}
	cmd := benchCmd(g)
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err = cmd.ExecuteContext(ctx)
	if testing.Verbose() {
		t.Log(errb.String())
	}
	return out.String(), err
}

// TestBenchQuickSQLite runs every section on a tiny scale and checks each
// produced a row without error, and that the tables were dropped.
func TestBenchQuickSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bench.db")
	out, err := runBench(t, "sqlite:"+path, "--quick", "--json", "--n", "300", "--workers", "1,2")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := bench.ReadJSON(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if r.Err != "" {
			t.Errorf("row %+v failed", r)
		}
		seen[r.Section+"/"+r.Impl] = true
	}
	for _, want := range []string{"enqueue/dbq", "enqueue/floor", "drain/dbq", "drain/floor", "depth/dbq", "depth/floor", "pickup/dbq", "steady/dbq"} {
		if !seen[want] {
			t.Errorf("no %s row in\n%s", want, out)
		}
	}
	assertNoBenchTables(t, path)
}

// TestBenchDrainBatch: --batch and --concurrency reach the drain's rows,
// dbq's and the floor's alike, which share a case so that the table sets
// each dbq row beside the floor of the same batch.
func TestBenchDrainBatch(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bench.db")
	out, err := runBench(t, "sqlite:"+path, "--json", "--sections", "drain", "--n", "300", "--workers", "1,2",
		"--batch", "7", "--concurrency", "14")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := bench.ReadJSON(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 2 dbq and 2 floor:\n%s", len(rows), out)
	}
	for _, r := range rows {
		wantConc := 14
		if r.Impl == "floor" {
			wantConc = 0
		}
		if r.Err != "" || r.PerSec <= 0 || r.Batch != 7 || r.Concurrency != wantConc ||
			r.Case != fmt.Sprintf("workers=%d batch=7", r.Workers) {
			t.Errorf("row %+v: want a throughput, batch 7, concurrency %d and case \"workers=%d batch=7\"", r, wantConc, r.Workers)
		}
	}
	var table strings.Builder
	if err := bench.WriteTable(&table, rows); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(table.String(), "\n") {
		if strings.Contains(line, " dbq ") && !strings.Contains(line, "%") {
			t.Errorf("dbq row without its share of the floor of its batch: %q", line)
		}
	}
	assertNoBenchTables(t, path)
}

func assertNoBenchTables(t *testing.T, path string) {
	t.Helper()
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'bench%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d bench tables left behind", n)
	}
}

// TestBenchServers runs the drain and enqueue sections, tiny, on each
// server that answers, and prints the table.
func TestBenchServers(t *testing.T) {
	for _, d := range []dialect.Name{dialect.Postgres, dialect.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, db, err := dbq.Migrator(ctx, dbtest.DSN(d), queue.Config{})
			if err != nil {
				dbtest.Unreachable(t, d, err)
			}
			db.Close()
			out, err := runBench(t, dbtest.DSN(d), "--quick", "--json", "--sections", "enqueue,drain", "--n", "500", "--workers", "1,4")
			if err != nil {
				t.Fatal(err)
			}
			rows, err := bench.ReadJSON(strings.NewReader(out))
			if err != nil {
				t.Fatal(err)
			}
			// 3 batch sizes and 2 worker counts, each dbq and floor, the
			// drain per strategy.
			want := 3*2 + 2*len(bench.Strategies(d)) + 2
			if len(rows) != want {
				t.Errorf("%d rows, want %d", len(rows), want)
			}
			for _, r := range rows {
				if r.Err != "" || r.PerSec <= 0 {
					t.Errorf("row %+v: no throughput", r)
				}
			}
			var table strings.Builder
			if err := bench.WriteTable(&table, rows); err != nil {
				t.Fatal(err)
			}
			out = table.String()
			t.Logf("\n%s", out)
		})
	}
}
