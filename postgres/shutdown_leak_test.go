package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/internal/faults"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
)

// TestShutdownLeaksNoGoroutines: on both strategies, a Worker stopped
// mid-run (handlers finishing, failing, panicking and hard-stopped), a
// claimer closed while it holds jobs, and a Queue closed after them —
// with the pool Open made — leave no goroutine behind. Not parallel: it
// counts every goroutine of the process.
func TestShutdownLeaksNoGoroutines(t *testing.T) {
	pool := testPool(t) // its goroutines predate the snapshot
	for _, s := range []Strategy{Advisory, SkipLocked} {
		t.Run(s.String(), func(t *testing.T) {
			cfg := Config{Config: queue.Config{Schema: newSchema(t, pool), Lease: 300 * time.Millisecond, Logger: faults.Quiet}, Strategy: s}
			ctx := testCtx(t)
			if err := Migrate(ctx, pool, cfg); err != nil {
				t.Fatal(err)
			}
			check := faults.Leaks(t)
			q, err := Open(ctx, dbtest.DSN(dialect.Postgres), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if st := faults.RunAndStop(t, q, "leak", 40); st.Released == 0 {
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
		})
	}
}

// TestInterruptedClaimLeavesNothing: a claim stuck behind a table lock
// (so certainly in flight) that is cancelled, or whose claimer is closed
// meanwhile, leaves no advisory lock, no open transaction and no claimed
// row behind once it returns: every job is claimable at once by another
// claimer. The conformance suite cuts claims off at random moments; this
// pins the moment down.
func TestInterruptedClaimLeavesNothing(t *testing.T) {
	t.Parallel()
	for _, s := range []Strategy{Advisory, SkipLocked} {
		for _, how := range []string{"cancel", "close"} {
			t.Run(s.String()+"/"+how, func(t *testing.T) {
				t.Parallel()
				q := newQueue(t, Config{Config: queue.Config{Logger: faults.Quiet}, Strategy: s}, true)
				all := enqueueN(t, q, "mid", 20)
				c := newClaimer(t, q)
				// Claim once first: the advisory claimer connects and the
				// SKIP LOCKED one runs its rescue, so the claim below is
				// one claim statement in flight.
				claim(t, c, "other", 1)
				pid := uint32(0)
				if ac, ok := c.(*AdvisoryClaimer); ok {
					pid = ac.backendPID()
				}
				unlock := lockTable(t, q)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				type result struct {
					jobs []*queue.Job
					err  error
				}
				claimed := make(chan result, 1)
				go func() {
					jobs, err := c.Claim(ctx, "mid", 5)
					claimed <- result{jobs, err}
				}()
				waitBlocked(t, q)
				closed := make(chan error, 1)
				switch how {
				case "cancel":
					cancel()
					r := <-claimed
					if r.err == nil {
						t.Fatalf("a claim cancelled while blocked returned %d jobs and no error", len(r.jobs))
					}
					unlock()
					if s == Advisory {
						if left := advisoryLeftovers(t, c.(*AdvisoryClaimer)); len(left) > 0 {
							t.Fatalf("after the cancelled claim the claimer holds %v", left)
						}
					} else if left := skipLockedLeftovers(t, c.(*SkipLockedClaimer)); len(left) > 0 {
						t.Fatalf("after the cancelled claim: %v", left)
					}
					closed <- c.Close(context.Background())
				case "close":
					calling := make(chan struct{})
					go func() {
						close(calling)
						closed <- c.Close(context.Background())
					}()
					<-calling
					select {
					case err := <-closed: // it did not wait for the claim
						closed <- err
					case <-time.After(100 * time.Millisecond): // it waits for the claim
					}
					unlock()
					r := <-claimed
					err := <-closed
					closed <- err
					if r.err == nil && len(r.jobs) > 0 {
						// A claim that Close overtook returns jobs that
						// Close gave back: they are not the caller's to end.
						err := c.Complete(context.Background(), queue.Leases(r.jobs))
						if !errors.Is(err, queue.ErrClosed) {
							t.Errorf("Complete after Close: %v, want ErrClosed", err)
						}
					}
				}
				if err := <-closed; err != nil {
					t.Fatalf("Close: %v", err)
				}
				if pid != 0 {
					if ids := lockedIDs(t, pid); len(ids) > 0 {
						t.Fatalf("the closed claimer's session still holds the locks of jobs %v", ids)
					}
				}
				if n := countRows(t, q, "state <> 'ready'"); n != 0 {
					t.Fatalf("%d jobs are not ready after the interrupted claim and Close", n)
				}
				other := newClaimer(t, q)
				if got := claim(t, other, "mid", 100); len(got) != len(all) {
					t.Fatalf("another claimer can claim %d of the %d jobs at once", len(got), len(all))
				}
			})
		}
	}
}

// lockTable takes an ACCESS EXCLUSIVE lock on q's jobs table in a
// transaction of its own, until unlock (or the test's end).
func lockTable(t *testing.T, q *queue.Queue) (unlock func()) {
	t.Helper()
	ctx := testCtx(t)
	tx, err := testPool(t).BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+driverOf(t, q).Table()+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	done := false
	unlock = func() {
		if !done {
			done = true
			if err := tx.Rollback(context.Background()); err != nil {
				t.Errorf("unlock: %v", err)
			}
		}
	}
	t.Cleanup(unlock)
	return unlock
}

// waitBlocked waits until a session waits for a lock on q's jobs table.
func waitBlocked(t *testing.T, q *queue.Queue) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var n int
		err := testPool(t).QueryRow(testCtx(t), `SELECT count(*) FROM pg_locks
			WHERE relation = $1::regclass AND NOT granted`, driverOf(t, q).Table()).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatal("the claim never waited for the table lock")
}
