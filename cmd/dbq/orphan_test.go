//go:build linux

package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
)

// claimerDB is a database and the claimer the test asks for there.
type claimerDB struct {
	testDB
	name     string
	strategy []string // global flags choosing the claimer
}

// claimerDBs are PostgreSQL's advisory and SKIP LOCKED claimers, MariaDB
// and SQLite.
func claimerDBs(t *testing.T) []claimerDB {
	pg := testDB{dialect.Postgres, dbtest.DSN(dialect.Postgres)}
	return []claimerDB{
		{pg, "postgres/advisory", nil},
		{pg, "postgres/skiplocked", []string{"--strategy", "skiplocked"}},
		{testDB{dialect.MySQL, dbtest.DSN(dialect.MySQL)}, "mysql", nil},
		{testDB{dialect.SQLite, "sqlite:" + filepath.Join(t.TempDir(), "orphan.db")}, "sqlite", nil},
	}
}

// TestWorkKilledLeavesNoProcess SIGKILLs `dbq work` while its job runs a
// tree of processes: a shell ignoring SIGTERM, its child in its group, and
// a shell and its child that left the group (setsid). Every one of them,
// and the supervisor, is gone within seconds: SIGTERM to the group at
// once, SIGKILL to the whole tree killDelay later.
func TestWorkKilledLeavesNoProcess(t *testing.T) {
	t.Parallel()
	bin := buildDBQ(t, t.TempDir())
	for _, db := range claimerDBs(t) {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			testKilledLeavesNoProcess(t, bin, db)
		})
	}
}

func testKilledLeavesNoProcess(t *testing.T, bin string, db claimerDB) {
	g, q := cliDB(t, db.testDB)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "orphan"}); err != nil {
		t.Fatal(err)
	}
	pids := filepath.Join(t.TempDir(), "pids")
	script := `trap "" TERM; echo $$ >> "$PIDS"; sleep 300 & echo $! >> "$PIDS"
setsid sh -c 'echo $$ >> "$PIDS"; sleep 300 & echo $! >> "$PIDS"; wait' &
wait`
	args := append(append(append([]string{}, g...), db.strategy...), "work", "-q", "orphan", "-c", "1", "--poll", "50ms",
		"--no-activity", "--", "sh", "-c", script)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "PIDS="+pids)
	out := outputFile(t)
	cmd.Stdout, cmd.Stderr = out.f, out.f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for _, pid := range readPIDs(t, pids) {
			if alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	for deadline := time.Now().Add(time.Minute); len(readPIDs(t, pids)) < 4; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job's processes did not all start\n%s", out.String())
		}
	}
	job := readPIDs(t, pids)
	// The job's command is the supervisor's child, and the supervisor
	// dbq's: a job process it is too.
	super := ppid(job[0])
	if super == cmd.Process.Pid || ppid(super) != cmd.Process.Pid {
		t.Fatalf("the command %d runs under %d, whose parent is %d; want a supervisor under dbq %d",
			job[0], super, ppid(super), cmd.Process.Pid)
	}
	job = append(job, super)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	for _, pid := range job {
		for deadline := killed.Add(killDelay + 10*time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("process %d of the job outlived the killed dbq work by %v", pid, time.Since(killed).Round(time.Millisecond))
				break
			}
		}
	}
	if t.Failed() {
		t.Logf("dbq work's output:\n%s", out.String())
		return
	}
	t.Logf("%s: the job's %d processes were gone %v after dbq work was killed", db.name, len(job), time.Since(killed).Round(time.Millisecond))
}

// TestSupervisorRefusesOutsideWork: started by hand, without the pipes
// dbq work gives it, the supervisor says what it is for and runs nothing.
func TestSupervisorRefusesOutsideWork(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := exec.Command(os.Args[0], superviseArg, "/bin/sh", "sh", "-c", "touch "+marker)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "under dbq work only") {
		t.Errorf("supervisor by hand: %v\n%s", err, out)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the supervisor started by hand ran its command")
	}
}

// TestJobLeavesNothingOutsideItsGroup: a job command that exits leaving a
// process in a session of its own (setsid) does not leave it running.
func TestJobLeavesNothingOutsideItsGroup(t *testing.T) {
	t.Parallel()
	jobLeavesNothing(t, `setsid sleep 1000 & echo $! >> "$0"`, "the job's process, in a session of its own,")
}
