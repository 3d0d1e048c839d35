package postgres

import (
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
	stmt := strings.ReplaceAll(d.stmts.claimSkipLocked, "FOR UPDATE SKIP LOCKED", "")
	if stmt == d.stmts.claimSkipLocked {
		t.Fatal("claim_skiplocked.sql has no FOR UPDATE SKIP LOCKED to strip")
	}
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
	type result struct {
		ids []int64
		err error
	}
	second := make(chan result, 1)
	go func() {
		ids, err := run(b, 2)
		second <- result{ids, err}
	}()
	// The second claim waits on the first's row locks before it commits.
	for waiting := false; !waiting; {
		if err := d.pool.QueryRow(ctx, "SELECT wait_event_type IS NOT DISTINCT FROM 'Lock' FROM pg_stat_activity WHERE pid = $1",
			pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-second:
			t.Fatalf("the second claim did not wait for the first: %v, %v", r.ids, r.err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-second:
	case <-ctx.Done():
		t.Fatal("the second claim never returned")
	}
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
