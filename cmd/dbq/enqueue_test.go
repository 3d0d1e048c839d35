//go:build unix

package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

// TestEnqueueLinesInterrupted interrupts `dbq enqueue --lines` (SIGINT to
// the process) once it has begun writing 100,000 lines, then runs it again
// on the same input. All or nothing: the interrupted run says it enqueued
// nothing and did not, and the rerun prints the count and stores each line
// exactly once.
//
// The input comes through a pipe that holds back its last line until the
// database shows writes (uncommitted or committed), so the interrupt lands
// mid-input whether the command streams its input or reads it all first.
func TestEnqueueLinesInterrupted(t *testing.T) {
	t.Parallel()
	bin := buildDBQ(t, t.TempDir())
	for _, db := range testDBs(t) {
		t.Run(string(db.d), func(t *testing.T) {
			t.Parallel()
			testEnqueueInterrupted(t, bin, db)
		})
	}
}

func testEnqueueInterrupted(t *testing.T, bin string, db testDB) {
	const total = 100_000
	g, q := cliDB(t, db)
	var input bytes.Buffer
	for i := range total {
		fmt.Fprintf(&input, "line-%06d\n", i)
	}
	all := input.Bytes()
	last := bytes.LastIndexByte(all[:len(all)-1], '\n') + 1
	args := append(append([]string{}, g...), "enqueue", "-q", "lines", "--lines")

	cmd := exec.Command(bin, args...)
	out := outputFile(t)
	cmd.Stdout, cmd.Stderr = out.f, out.f
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	sendLast := make(chan struct{})
	go func() {
		defer stdin.Close()
		if _, err := stdin.Write(all[:last]); err != nil {
			return // the command ended
		}
		<-sendLast
		_, _ = stdin.Write(all[last:])
	}()
	writing := writesBegun(t, db, q)
	waitFor := func(d time.Duration) bool {
		for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if writing() {
				return true
			}
		}
		return false
	}
	if !waitFor(15 * time.Second) {
		close(sendLast)
		if !waitFor(time.Minute) {
			t.Fatalf("dbq enqueue wrote nothing in a minute\n%s", out.String())
		}
	} else {
		defer close(sendLast)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("interrupted dbq enqueue: %v, want exit status 1\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "interrupted; nothing enqueued") {
		t.Errorf("interrupted dbq enqueue does not say it enqueued nothing:\n%s", out.String())
	}
	if n := len(allJobs(t, q, "lines")); n != 0 {
		t.Errorf("after the interrupt %d of %d lines are stored, want 0", n, total)
	}

	rerun := exec.Command(bin, args...)
	rerun.Stdin = bytes.NewReader(all)
	got, err := rerun.CombinedOutput()
	if err != nil {
		t.Fatalf("rerun: %v\n%s", err, got)
	}
	if want := fmt.Sprintf("enqueued %d jobs\n", total); string(got) != want {
		t.Errorf("rerun printed %q, want %q", got, want)
	}
	seen := map[string]int{}
	for _, j := range allJobs(t, q, "lines") {
		seen[string(j.Payload)]++
	}
	var wrong []string
	for i := range total {
		if line := fmt.Sprintf("line-%06d", i); seen[line] != 1 {
			wrong = append(wrong, fmt.Sprintf("%s %d times", line, seen[line]))
		}
	}
	if len(wrong) > 0 || len(seen) != total {
		t.Errorf("%d distinct payloads stored, want %d; %d lines not stored once, e.g. %v",
			len(seen), total, len(wrong), wrong[:min(3, len(wrong))])
	}
}

// writesBegun returns a func that reports whether a writer has begun
// storing jobs in q's table: committed rows, or, uncommitted, a PostgreSQL
// backend holding a write lock on it, rows MySQL shows to READ UNCOMMITTED,
// or the SQLite write lock taken.
func writesBegun(t *testing.T, db testDB, q *queue.Queue) func() bool {
	t.Helper()
	ctx := context.Background()
	table := q.Config().Names().Jobs()
	sdb, _, err := dbq.OpenDB(ctx, db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sdb.Close() })
	return func() bool {
		if st, err := q.Stats(ctx); err == nil && len(st) > 0 {
			return true
		}
		var n int
		switch db.d {
		case dialect.Postgres:
			err = sdb.QueryRowContext(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
				WHERE c.relname = $1 AND l.mode = 'RowExclusiveLock' AND l.pid <> pg_backend_pid()`, table).Scan(&n)
		case dialect.MySQL:
			err = func() error {
				tx, err := sdb.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadUncommitted, ReadOnly: true})
				if err != nil {
					return err
				}
				defer tx.Rollback()
				return tx.QueryRowContext(ctx, "SELECT count(*) FROM `"+table+"`").Scan(&n)
			}()
		case dialect.SQLite:
			// BEGIN IMMEDIATE fails at once while another connection
			// holds the write lock.
			err = func() error {
				conn, err := sdb.Conn(ctx)
				if err != nil {
					return err
				}
				defer conn.Close()
				if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
					return err
				}
				if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
					n = 1
					return nil
				}
				_, err = conn.ExecContext(ctx, "ROLLBACK")
				return err
			}()
		}
		if err != nil {
			t.Errorf("looking for writes: %v", err)
			return false
		}
		return n > 0
	}
}
