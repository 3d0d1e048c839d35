//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// TestWorkCtrlC presses Ctrl-C at `dbq work` as a terminal does: SIGINT to
// the whole foreground process group, dbq and the job commands it started.
// Each of three jobs runs a shell that starts a child in its group and
// waits. Once: the commands outlive the 1 s grace and get SIGTERM. Twice:
// the commands ignore SIGTERM and the grace is 10 minutes, so only the
// second Ctrl-C's SIGKILL ends them. Either way dbq exits 0, long before
// any 10 minutes, every job is ready again with no attempt spent, and no
// process of any job is left.
func TestWorkCtrlC(t *testing.T) {
	t.Parallel()
	bin := buildDBQ(t, t.TempDir())
	for _, db := range testDBs(t) {
		for _, twice := range []bool{false, true} {
			name := string(db.d) + "/once"
			if twice {
				name = string(db.d) + "/twice"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				testCtrlC(t, bin, db, twice)
			})
		}
	}
}

func testCtrlC(t *testing.T, bin string, db testDB, twice bool) {
	g, q := cliDB(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "ctrlc"}, queue.NewJob{Queue: "ctrlc"}, queue.NewJob{Queue: "ctrlc"}); err != nil {
		t.Fatal(err)
	}
	pids := filepath.Join(t.TempDir(), "pids")
	script, grace := `echo $$ >> "$PIDS"; sleep 1000 & echo $! >> "$PIDS"; wait`, "1s"
	if twice {
		script, grace = `trap "" TERM; `+script, "10m"
	}
	args := append(append([]string{}, g...), "work", "-q", "ctrlc", "-c", "3", "--poll", "50ms",
		"--shutdown-timeout", grace, "--", "sh", "-c", script)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "PIDS="+pids)
	// A process group of its own, as a shell gives a foreground job.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A file, not a pipe: Wait then waits for dbq alone, not for every
	// process that inherited its output.
	out := outputFile(t)
	cmd.Stdout, cmd.Stderr = out.f, out.f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		for _, pid := range readPIDs(t, pids) {
			if alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	// Three shells and their three sleeps.
	for deadline := time.Now().Add(time.Minute); len(readPIDs(t, pids)) < 6; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job commands did not all start\n%s", out.String())
		}
	}
	ctrlC := func() {
		if err := syscall.Kill(-pgid, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
	}
	ctrlC()
	if twice {
		time.Sleep(300 * time.Millisecond)
		ctrlC()
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("dbq work after Ctrl-C: %v (want exit 0)\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("dbq work still running a minute after Ctrl-C\n%s", out.String())
	}
	if !strings.Contains(out.String(), "0 retried (0 dead), 0 snoozed, 3 released") {
		t.Errorf("summary does not say 3 released:\n%s", out.String())
	}
	jobs := allJobs(t, q, "ctrlc")
	if len(jobs) != 3 {
		t.Errorf("%d jobs stored, want the 3 back", len(jobs))
	}
	for _, j := range jobs {
		if j.State != queue.StateReady || j.Attempt != 0 {
			t.Errorf("job %d: %s, attempt %d, last error %q; want ready, attempt 0", j.ID, j.State, j.Attempt, j.LastError)
		}
	}
	// Orphans are reaped by init; give it a moment.
	for _, pid := range readPIDs(t, pids) {
		for deadline := time.Now().Add(5 * time.Second); alive(pid); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("process %d of a job outlived dbq work", pid)
				break
			}
		}
	}
}

// output is a command's output, in a file.
type output struct{ f *os.File }

func outputFile(t *testing.T) output {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "output"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return output{f}
}

func (o output) String() string {
	b, _ := os.ReadFile(o.f.Name())
	return string(b)
}

// readPIDs reads the complete lines of a file of process ids.
func readPIDs(t *testing.T, path string) []int {
	t.Helper()
	var pids []int
	for _, id := range readLedger(t, path) {
		pids = append(pids, int(id))
	}
	return pids
}

// alive reports whether process pid runs: it exists and, where /proc
// tells, is no zombie waiting to be reaped.
func alive(pid int) bool {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		// pid (comm) state ...; comm may hold spaces and parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
			return b[i+2] != 'Z'
		}
	}
	return syscall.Kill(pid, 0) == nil
}

// TestJobLeavesNothingRunning: a job command that exits leaving a child
// in its process group does not leave it running.
func TestJobLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	jobLeavesNothing(t, `sleep 1000 & echo $! >> "$0"`, "the job's child")
}

// jobLeavesNothing runs script (sh -c, $0 a file it appends a pid to) as a
// job and fails t unless that pid is gone within 5 s of the job's end.
func jobLeavesNothing(t *testing.T, script, what string) {
	t.Helper()
	pids := filepath.Join(t.TempDir(), "pids")
	h := commandHandler([]string{"sh", "-c", script, pids}, jobEnv(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h(ctx, &queue.Job{ID: 1, Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	got := readPIDs(t, pids)
	if len(got) != 1 {
		t.Fatalf("pids: %v", got)
	}
	for deadline := time.Now().Add(5 * time.Second); alive(got[0]); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(got[0], syscall.SIGKILL)
			t.Fatalf("%s %d outlived its run", what, got[0])
		}
	}
}
