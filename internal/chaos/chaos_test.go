//go:build linux

package chaos

import (
	"context"
	"database/sql"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
)

// long reports whether DBQ_CHAOS=long asks for the long form (make chaos).
func long() bool { return os.Getenv("DBQ_CHAOS") == "long" }

// TestChaos drains a queue with real `dbq work` processes while killing,
// freezing and cutting them off (and, in the long form, restarting the
// server), on every dialect that answers, and checks from the ledger that
// no job was lost and every duplicate was a faulted worker's.
//
// Short form (make test): 10,000 jobs, 4 workers of concurrency 16, 2s
// leases, 5 kills, 1 freeze and, on a server, 1 connection cut. Long form
// (DBQ_CHAOS=long, make chaos): 200,000 jobs, 16 workers, 5s leases, 50
// kills, 4 freezes and, on a server, 4 cuts and 2 server restarts — which
// restart the server every other user of it shares.
func TestChaos(t *testing.T) {
	bin := buildDBQ(t)
	// PostgreSQL twice: its default claimer holds jobs by session locks,
	// which a cut or a restart ends at once; skiplocked holds them by lease.
	cases := []struct {
		name     string
		d        dialect.Name
		strategy string
	}{
		{"postgres", dialect.Postgres, ""},
		{"postgres-skiplocked", dialect.Postgres, "skiplocked"},
		{"mysql", dialect.MySQL, ""},
		{"sqlite", dialect.SQLite, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !long() {
				// Not in the long form: a server restart would hit the
				// other runs on that server, outside their ledgers.
				t.Parallel()
			}
			cfg := Config{
				Bin:      bin,
				Prefix:   dbtest.UniqueName("chaos") + "_",
				Strategy: tc.strategy,
				Jobs:     10000, Workers: 4, Kills: 5, Freezes: 1, Cuts: 1,
				Concurrency: 16, Timeout: 8 * time.Minute,
				Logf: t.Logf,
				// DBQ_CHAOS_LOGS names a directory that keeps every
				// worker's whole log.
				LogDir: os.Getenv("DBQ_CHAOS_LOGS"),
				// DBQ_CHAOS_KEEP=1 keeps a failed run's tables.
				Keep: os.Getenv("DBQ_CHAOS_KEEP") != "",
			}
			if long() {
				cfg.Jobs, cfg.Workers, cfg.Kills, cfg.Freezes, cfg.Cuts, cfg.Restarts = 200000, 16, 50, 4, 4, 2
				cfg.Timeout = 40 * time.Minute
				// 16 workers on a small machine stall the server now and
				// then: MariaDB here paused every claim for 1-2s under
				// this load, and 2s leases then expired under live
				// workers (attempt+1 re-runs, counted as unexplained).
				cfg.Lease = 5 * time.Second
			}
			switch tc.d {
			case dialect.SQLite:
				cfg.DSN = "sqlite:" + filepath.Join(t.TempDir(), "chaos.db")
				cfg.Cuts, cfg.Restarts = 0, 0
			default:
				cfg.DSN = dbtest.DSN(tc.d)
				reachable(t, tc.d, cfg.DSN)
			}
			r, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r)
			for _, p := range r.Problems {
				t.Error(p)
			}
			if r.Kills != cfg.Kills || r.Freezes != cfg.Freezes || r.Cuts != cfg.Cuts || r.Restarts != cfg.Restarts {
				t.Errorf("injected %d kills, %d freezes, %d cuts, %d restarts; planned %d, %d, %d, %d",
					r.Kills, r.Freezes, r.Cuts, r.Restarts, cfg.Kills, cfg.Freezes, cfg.Cuts, cfg.Restarts)
			}
			if r.Executions < cfg.Jobs {
				t.Errorf("%d runs for %d jobs", r.Executions, cfg.Jobs)
			}
		})
	}
}

// reachable ends the test unless d answers at dsn (see dbtest.Unreachable).
func reachable(t *testing.T, d dialect.Name, dsn string) {
	t.Helper()
	db, err := openDB(dsn)
	if err == nil {
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = db.PingContext(ctx)
	}
	if err != nil {
		dbtest.Unreachable(t, d, err)
	}
}

// buildDBQ builds cmd/dbq into a temporary directory.
func buildDBQ(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "go"
	}
	bin := filepath.Join(t.TempDir(), "dbq")
	cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/dbq")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/dbq: %v\n%s", err, out)
	}
	return bin
}

// TestEventExplains: a fault explains a run of a worker it hit that was
// under way or held when it struck, or started within Slack after it, and
// no other run.
func TestEventExplains(t *testing.T) {
	const s = int64(time.Second)
	e := event{kind: "freeze", pids: map[int]bool{7: true}, t0: 100 * s, t1: 103 * s, held: map[int64]bool{1: true}}
	for _, tc := range []struct {
		name string
		r    run
		want bool
	}{
		{"held, finished before", run{job: 1, pid: 7, started: 90 * s, finished: 95 * s}, true},
		{"under way", run{job: 2, pid: 7, started: 99 * s, finished: 104 * s}, true},
		{"unfinished", run{job: 2, pid: 7, started: 99 * s}, true},
		{"started during", run{job: 2, pid: 7, started: 101 * s, finished: 106 * s}, true},
		{"started within slack after", run{job: 2, pid: 7, started: 104 * s, finished: 106 * s}, true},
		{"started past slack", run{job: 2, pid: 7, started: 106 * s, finished: 107 * s}, false},
		{"held but started past slack", run{job: 1, pid: 7, started: 106 * s, finished: 107 * s}, false},
		{"finished before, not held", run{job: 2, pid: 7, started: 90 * s, finished: 95 * s}, false},
		{"another worker", run{job: 1, pid: 8, started: 99 * s}, false},
	} {
		if got := e.explains(&tc.r); got != tc.want {
			t.Errorf("%s: explains = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCheck: the ledger check counts runs, duplicates and lost jobs, and
// names each job run twice outside any fault, each lost job and each
// payload that changed.
func TestCheck(t *testing.T) {
	const s = int64(time.Second)
	ids := []int64{1, 2, 3, 4, 5}
	payloads := map[int64]string{1: "a", 2: "b", 3: "c", 4: "d", 5: "e"}
	kill := event{kind: "kill", pids: map[int]bool{10: true}, t0: 50 * s, t1: 51 * s, held: map[int64]bool{2: true}}
	runs := []run{
		{job: 1, payload: "a", pid: 10, started: 1 * s, finished: 2 * s},
		{job: 2, payload: "b", pid: 10, started: 40 * s, finished: 41 * s}, // held at the kill
		{job: 2, payload: "b", pid: 11, started: 55 * s, finished: 56 * s}, // its re-run
		{job: 3, payload: "c", pid: 11, started: 1 * s, finished: 2 * s},
		{job: 3, payload: "c", pid: 12, started: 3 * s, finished: 4 * s}, // a double claim
		{job: 4, payload: "d", pid: 10, started: 49 * s},                 // unfinished, killed
		{job: 5, payload: "X", pid: 12, started: 1 * s, finished: 2 * s},
		{job: 9, payload: "z", pid: 12, started: 1 * s, finished: 2 * s},
	}
	f := check(runs, []event{kill}, ids, payloads)
	if f.executions != 8 || f.finished != 7 || f.duplicates != 2 || f.explained != 1 || f.lost != 1 {
		t.Errorf("findings %+v: want 8 executions, 7 finished, 2 duplicates (1 explained), 1 lost", f)
	}
	all := strings.Join(f.problems, "\n")
	for _, want := range []string{"LOST: jobs with no finished run: 1", "job 4 (1 unfinished runs)",
		"UNEXPLAINED DUPLICATES", "job 3 ran 2 times", "two runs of the same attempt", `job 5 ran with "X"`, "runs of jobs never enqueued: 1"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems do not say %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "job 2 ran") {
		t.Errorf("job 2's re-run after the kill is reported:\n%s", all)
	}
}

// TestSocketPorts: the local ports of a process's TCP connections to a
// port are found in /proc, and only those.
func TestSocketPorts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	remote := ln.Addr().(*net.TCPAddr).Port
	want := map[int]bool{}
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		want[c.LocalAddr().(*net.TCPAddr).Port] = true
	}
	got, err := socketPorts(os.Getpid(), remote)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("socketPorts = %v, want %v", got, want)
	}
	for p := range want {
		if !got[p] {
			t.Fatalf("socketPorts = %v, want %v", got, want)
		}
	}
}

// TestLedgerDDL: the ledger's DDL runs on SQLite, and a run's row round
// trips (the server dialects run it in TestChaos).
func TestLedgerDDL(t *testing.T) {
	db, err := openDB("sqlite:" + filepath.Join(t.TempDir(), "ddl.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, stmt := range ledgerDDL(dialect.SQLite, `"p_ledger"`, "p_ledger_pid") {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if _, err := db.Exec(`INSERT INTO "p_ledger" (exec_id, job_id, payload, pid, attempt, started_ns) VALUES (?, ?, ?, ?, ?, ?)`,
		int64(1)<<62, 5, []byte("x\x00y"), 42, 0, time.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
	var payload []byte
	var fin sql.NullInt64
	if err := db.QueryRow(`SELECT payload, finished_ns FROM "p_ledger" WHERE exec_id = ?`, int64(1)<<62).Scan(&payload, &fin); err != nil {
		t.Fatal(err)
	}
	if string(payload) != "x\x00y" || fin.Valid {
		t.Fatalf("row came back as %q, finished %v", payload, fin)
	}
}
