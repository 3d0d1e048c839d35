package mysql

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/faults"
	"github.com/dbqueue/dbq/queue"
)

// TestInterruptedClaimLeavesNothing: a claim stuck behind LOCK TABLES
// (so certainly in flight) that is cancelled, or whose claimer is closed
// meanwhile, leaves no open transaction (INNODB_TRX) and no claimed row
// behind once it returns and the claimer is closed: every job is
// claimable at once by another claimer. The conformance suite cuts claims
// off at random moments; this pins the moment down. (A claim's steps run
// to their end whatever ctx says, so a cancelled claim may still return
// jobs; Close gives those back.)
func TestInterruptedClaimLeavesNothing(t *testing.T) {
	t.Parallel()
	innodbOnly(t)
	for _, how := range []string{"cancel", "close"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			name, dsn := newDatabase(t)
			q, d := openQueueOn(t, dsn, Config{Config: queue.Config{Logger: faults.Quiet}}, true)
			all := enqueueN(t, q, "mid", 20, "m")
			c := newClaimer(t, q)
			if _, err := c.Claim(context.Background(), "other", 1); err != nil { // connect first
				t.Fatal(err)
			}
			session := sessionOf(c)
			unlock := lockTables(t, name, d)
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
			waitLockWait(t, session)
			closed := make(chan error, 1)
			switch how {
			case "cancel":
				cancel()
				time.Sleep(50 * time.Millisecond)
				unlock()
				<-claimed
				if left := openTrx(t, sessionOf(c)); len(left) > 0 {
					t.Fatalf("after the cancelled claim: %v", left)
				}
				closed <- c.Close(context.Background())
			case "close":
				go func() { closed <- c.Close(context.Background()) }()
				time.Sleep(50 * time.Millisecond)
				unlock()
				r := <-claimed
				err := <-closed
				closed <- err
				if r.err == nil && len(r.jobs) > 0 {
					if err := c.Complete(context.Background(), queue.Leases(r.jobs)); !errors.Is(err, queue.ErrClosed) {
						t.Errorf("Complete after Close: %v, want ErrClosed", err)
					}
				}
			}
			if err := <-closed; err != nil {
				t.Fatalf("Close: %v", err)
			}
			if left := openTrx(t, session); len(left) > 0 {
				t.Fatalf("after Close: %v", left)
			}
			other := newClaimer(t, q)
			got, err := other.Claim(context.Background(), "mid", 100)
			if err != nil || len(got) != len(all) {
				t.Fatalf("another claimer can claim %d of the %d jobs at once (%v)", len(got), len(all), err)
			}
		})
	}
}

// lockTables write-locks database db's jobs table from a session of its
// own, until unlock (or the test's end).
func lockTables(t *testing.T, db string, d *Driver) (unlock func()) {
	t.Helper()
	conn, err := admin(t).Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	table := dialect.Quote(dialect.MySQL, db) + "." + dialect.Quote(dialect.MySQL, d.cfg.Names().Jobs())
	if _, err := conn.ExecContext(context.Background(), "LOCK TABLES "+table+" WRITE"); err != nil {
		t.Fatal(err)
	}
	done := false
	unlock = func() {
		if !done {
			done = true
			if _, err := conn.ExecContext(context.Background(), "UNLOCK TABLES"); err != nil {
				t.Errorf("UNLOCK TABLES: %v", err)
			}
			conn.Close()
		}
	}
	t.Cleanup(unlock)
	return unlock
}

// waitLockWait waits until session id waits for a table lock.
func waitLockWait(t *testing.T, id int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var n int
		err := admin(t).QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE ID = ? AND STATE LIKE '%lock%'`, id).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatal("the claim never waited for the table lock")
}
