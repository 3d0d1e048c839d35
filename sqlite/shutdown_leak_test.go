package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/dbqueue/dbq/internal/faults"
	"github.com/dbqueue/dbq/queue"
)

// TestShutdownLeaksNoGoroutines: a Worker stopped mid-run (handlers
// finishing, failing, panicking and hard-stopped), a claimer closed while
// it holds jobs, and a Queue closed after them leave no goroutine behind.
// Not parallel: it counts every goroutine of the process.
func TestShutdownLeaksNoGoroutines(t *testing.T) {
	check := faults.Leaks(t)
	ctx := context.Background()
	cfg := Config{Config: queue.Config{Lease: 300 * time.Millisecond, Logger: faults.Quiet}}
	q, err := Open(ctx, filepath.Join(t.TempDir(), "leak.db"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, driverOf(t, q).DB(), cfg); err != nil {
		t.Fatal(err)
	}
	st := faults.RunAndStop(t, q, "leak", 40)
	if st.Released == 0 {
		t.Errorf("worker stats %+v: no handler was hard-stopped", st)
	}
	c, err := q.NewClaimer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if jobs, err := c.Claim(ctx, "leak", 5); err != nil || len(jobs) == 0 {
		t.Fatalf("Claim after shutdown: %d jobs, %v", len(jobs), err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	check()
}

// TestInterruptedClaimLeavesNothing: a claim stuck behind another
// connection's write lock (so certainly in flight) that is cancelled, or
// whose claimer is closed meanwhile, leaves no write lock, no taken write
// gate and no claimed row behind once it returns: every job is claimable
// at once by another claimer.
func TestInterruptedClaimLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"cancel", "close"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "mid.db")
			q := newTestQueue(t, path, queue.Config{Logger: faults.Quiet}, true)
			ctx := context.Background()
			jobs := make([]queue.NewJob, 20)
			for i := range jobs {
				jobs[i] = queue.NewJob{Queue: "mid"}
			}
			if _, err := q.Enqueue(ctx, jobs...); err != nil {
				t.Fatal(err)
			}
			c, err := q.NewClaimer(ctx)
			if err != nil {
				t.Fatal(err)
			}
			unlock := lockFile(t, path)
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			type result struct {
				jobs []*queue.Job
				err  error
			}
			claimed := make(chan result, 1)
			go func() {
				jobs, err := c.Claim(cctx, "mid", 5)
				claimed <- result{jobs, err}
			}()
			waitGate(t, driverOf(t, q)) // the claim waits for the write lock
			switch how {
			case "cancel":
				cancel()
				r := <-claimed
				if r.err == nil {
					t.Fatalf("a claim cancelled while blocked returned %d jobs and no error", len(r.jobs))
				}
				unlock()
				if left := leftovers(t, c); len(left) > 0 {
					t.Fatalf("after the cancelled claim: %v", left)
				}
				if err := c.Close(ctx); err != nil {
					t.Fatal(err)
				}
			case "close":
				if err := c.Close(ctx); err != nil {
					t.Fatal(err)
				}
				unlock()
				if r := <-claimed; r.err == nil && len(r.jobs) > 0 {
					if err := c.Complete(ctx, queue.Leases(r.jobs)); !errors.Is(err, queue.ErrClosed) {
						t.Errorf("Complete after Close: %v, want ErrClosed", err)
					}
				}
			}
			other, err := q.NewClaimer(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close(ctx)
			if got, err := other.Claim(ctx, "mid", 100); err != nil || len(got) != len(jobs) {
				t.Fatalf("another claimer can claim %d of the %d jobs at once (%v)", len(got), len(jobs), err)
			}
		})
	}
}

// waitGate waits until a writer of d has taken its write gate: a claim
// that got there is past its closed check and waits for the write lock.
func waitGate(t *testing.T, d *Driver) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if len(d.gate) != 0 {
			return
		}
	}
	t.Fatal("the claim never took the write gate")
}

// lockFile takes the write lock of the database at path from a connection
// of its own, until unlock (or the test's end).
func lockFile(t *testing.T, path string) (unlock func()) {
	t.Helper()
	db, err := sql.Open(DriverName, path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	done := false
	unlock = func() {
		if !done {
			done = true
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
			conn.Close()
			db.Close()
		}
	}
	t.Cleanup(unlock)
	return unlock
}
