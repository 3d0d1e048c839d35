package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestSkipLockedClaimTrustsItsUpdate: two runs of the SKIP LOCKED claim
// whose inner select locked nothing (the clause stripped, as on a server
// that accepts SKIP LOCKED but ignores it) pick the same jobs. The second
// waits on the first's row locks and, when the first commits, must change
// and return none of them: its UPDATE changes only rows still ready.
func TestSkipLockedClaimTrustsItsUpdate(t *testing.T) {
	t.Parallel()
	q := newQueue(t, Config{Strategy: SkipLocked}, true)
	d := driverOf(t, q)
	ctx := testCtx(t)
	ids := enqueueN(t, q, "g", 10)
	stmt := withoutLocking(t, d.stmts.claimSkipLocked, "claim_skiplocked.sql")
	run := func(tx pgx.Tx, token int64) ([]int64, error) {
		rows, err := tx.Query(ctx, stmt, "g", int64(len(ids)), token, d.leaseUS, headPriority, headRunAt, int64(0))
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, func(r pgx.CollectableRow) (int64, error) {
			vals, err := r.Values()
			return vals[0].(int64), err
		})
	}
	a, err := d.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Rollback(ctx)
	got, err := run(a, 1)
	if err != nil || len(got) != len(ids) {
		t.Fatalf("first claim: %v, %v", got, err)
	}
	b, err := d.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Rollback(ctx)
	var pid uint32
	if err := b.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	second := whileWaiting(t, ctx, d, pid, func() ([]int64, error) { return run(b, 2) })
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := outcomeOf(t, ctx, second, "the second claim")
	if r.err != nil || len(r.ids) != 0 {
		t.Fatalf("the second claim of the same jobs returned %v (%v); want none: the first holds them", r.ids, r.err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var held int
	if err := d.pool.QueryRow(ctx, "SELECT count(*) FROM "+d.stmts.table+" WHERE claim_token = 1").Scan(&held); err != nil || held != len(ids) {
		t.Fatalf("%d jobs hold the first claim's token (%v), want %d", held, err, len(ids))
	}
}

// TestRescueTrustsItsUpdate: a rescue whose inner select locked nothing
// picks expired leases that their holder is extending at that moment. It
// waits on the holder's row locks and, when the holder commits, must leave
// the jobs to it: its UPDATE changes only rows still claimed and expired.
func TestRescueTrustsItsUpdate(t *testing.T) {
	t.Parallel()
	q := newQueue(t, Config{Strategy: SkipLocked}, true)
	d := driverOf(t, q)
	stmt := withoutLocking(t, d.stmts.rescue, "rescue.sql")
	ctx := testCtx(t)
	ids := enqueueN(t, q, "g", 10)
	c, err := q.NewClaimer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if js, err := c.Claim(ctx, "g", len(ids)); err != nil || len(js) != len(ids) {
		t.Fatalf("claim: %d jobs, %v", len(js), err)
	}
	// Every lease has ended; the holder extends them all, uncommitted yet.
	if _, err := d.pool.Exec(ctx, "UPDATE "+d.stmts.table+" SET claimed_until = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	holder, err := d.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	if _, err := holder.Exec(ctx, "UPDATE "+d.stmts.table+" SET claimed_until = now() + interval '1 hour'"); err != nil {
		t.Fatal(err)
	}
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var pid uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	rescue := whileWaiting(t, ctx, d, pid, func() ([]int64, error) {
		return queryIDs(ctx, conn, stmt, d.stmts.rescueKey)
	})
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := outcomeOf(t, ctx, rescue, "the rescue")
	if r.err != nil || len(r.ids) != 0 {
		t.Fatalf("the rescue of leases extended meanwhile returned %v (%v); want none: their holder keeps them", r.ids, r.err)
	}
	var kept int
	if err := d.pool.QueryRow(ctx, "SELECT count(*) FROM "+d.stmts.table+
		" WHERE state = 'claimed' AND claimed_until > now() AND attempt = 0").Scan(&kept); err != nil || kept != len(ids) {
		t.Fatalf("%d jobs still held by their holder, unspent (%v); want %d", kept, err, len(ids))
	}
}

// withoutLocking returns stmt without its FOR UPDATE SKIP LOCKED, as a
// server that accepts the clause but locks nothing runs it.
func withoutLocking(t *testing.T, stmt, file string) string {
	t.Helper()
	s := strings.ReplaceAll(stmt, "FOR UPDATE SKIP LOCKED", "")
	if s == stmt {
		t.Fatalf("%s has no FOR UPDATE SKIP LOCKED to strip", file)
	}
	return s
}

// outcome is what a statement run by whileWaiting returned.
type outcome struct {
	ids []int64
	err error
}

// whileWaiting runs fn, which runs a statement on server process pid, in a
// goroutine, and returns once that statement waits on a lock; fn's
// outcome arrives on the channel. It fails the test when fn returns
// without having waited.
func whileWaiting(t *testing.T, ctx context.Context, d *Driver, pid uint32, fn func() ([]int64, error)) <-chan outcome {
	t.Helper()
	ch := make(chan outcome, 1)
	go func() {
		ids, err := fn()
		ch <- outcome{ids, err}
	}()
	for waiting := false; !waiting; {
		if err := d.pool.QueryRow(ctx, "SELECT wait_event_type IS NOT DISTINCT FROM 'Lock' FROM pg_stat_activity WHERE pid = $1",
			pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-ch:
			t.Fatalf("the statement did not wait on a lock: %v, %v", r.ids, r.err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return ch
}

// outcomeOf receives what whileWaiting's statement returned, by ctx's
// deadline.
func outcomeOf(t *testing.T, ctx context.Context, ch <-chan outcome, what string) outcome {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		t.Fatalf("%s never returned", what)
		return outcome{}
	}
}
