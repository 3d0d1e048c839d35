package postgres

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// A job whose advisory key another session holds (a claimer of another
// process) is not cancelled; once the key is free it is.
func TestCancelSkipsAdvisoryLockedJob(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q := newQueue(t, Config{}, true)
	jobs := enqueueN(t, q, "c", 2)
	conn, err := testPool(t).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	lock := "SELECT pg_advisory_lock(tableoid::int4, id::bit(32)::int4) FROM " + driverOf(t, q).Table() + " WHERE id = $1"
	if _, err := conn.Exec(ctx, lock, jobs[0]); err != nil {
		t.Fatal(err)
	}
	got, err := q.Cancel(ctx, jobs...)
	if err != nil || !slices.Equal(got, jobs[1:]) {
		t.Fatalf("Cancel with job %d locked = %v, %v; want %v", jobs[0], got, err, jobs[1:])
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
		t.Fatal(err)
	}
	got, err = q.Cancel(ctx, jobs...)
	if err != nil || !slices.Equal(got, jobs[:1]) {
		t.Fatalf("Cancel after unlock = %v, %v; want %v", got, err, jobs[:1])
	}
}

// EnqueueUnique in the caller's transaction, pgx and database/sql: the
// collision neither fails nor aborts the transaction, which commits what
// else it did.
func TestEnqueueUniqueInCallersTx(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q := newQueue(t, Config{}, true)
	job := queue.NewJob{Queue: "u", Payload: []byte("x"), DedupeKey: "k"}
	first, existed, err := q.EnqueueUnique(ctx, nil, job)
	if err != nil || existed {
		t.Fatalf("first EnqueueUnique = %d, %v, %v", first, existed, err)
	}

	tx, err := testPool(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	id, existed, err := q.EnqueueUnique(ctx, tx, job)
	if err != nil || !existed || id != first {
		t.Fatalf("pgx tx EnqueueUnique = %d, %v, %v; want %d, true", id, existed, err, first)
	}
	if _, err := q.EnqueueTx(ctx, tx, queue.NewJob{Queue: "u", Payload: []byte("after")}); err != nil {
		t.Fatalf("pgx tx aborted by the collision: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	db := SQLDB(testPool(t))
	defer db.Close()
	stx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stx.Rollback() }()
	id, existed, err = q.EnqueueUnique(ctx, stx, job)
	if err != nil || !existed || id != first {
		t.Fatalf("sql tx EnqueueUnique = %d, %v, %v; want %d, true", id, existed, err, first)
	}
	fresh, existed, err := q.EnqueueUnique(ctx, stx, queue.NewJob{Queue: "u", DedupeKey: "k2", Delay: time.Hour})
	if err != nil || existed || fresh == 0 {
		t.Fatalf("sql tx new key = %d, %v, %v", fresh, existed, err)
	}
	if err := stx.Commit(); err != nil {
		t.Fatalf("sql tx commit: %v", err)
	}
	if n := countRows(t, q, "queue = 'u'"); n != 3 {
		t.Fatalf("%d jobs stored, want 3", n)
	}
}

// Rescue runs one at a time per table: while the rescue key is held, a
// Rescue returns nothing; then it returns the expired leases.
func TestRescueSingleRunner(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q := newQueue(t, Config{Strategy: SkipLocked}, true)
	d := driverOf(t, q)
	jobs := enqueueN(t, q, "r", 3)
	if _, err := testPool(t).Exec(ctx, "UPDATE "+d.Table()+
		" SET state = 'claimed', claim_token = 1, claimed_until = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	tx, err := testPool(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var ok bool
	if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1)", d.stmts.rescueKey).Scan(&ok); err != nil || !ok {
		t.Fatalf("take rescue key: %v, %v", ok, err)
	}
	if n, err := d.Rescue(ctx); err != nil || n != 0 {
		t.Fatalf("Rescue while another runs = %d, %v; want 0", n, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := d.Rescue(ctx); err != nil || n != len(jobs) {
		t.Fatalf("Rescue = %d, %v; want %d", n, err, len(jobs))
	}
	names := q.Config().Names()
	names.Prefix = "other_"
	other, err := loadStatements(names)
	if err != nil {
		t.Fatal(err)
	}
	if other.rescueKey == d.stmts.rescueKey {
		t.Fatal("two tables share a rescue key")
	}
}

// Stats reports Paused; a paused queue keeps its counts.
func TestStatsPaused(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	for _, s := range []Strategy{Advisory, SkipLocked} {
		q := newQueue(t, Config{Strategy: s}, true)
		enqueueN(t, q, "p", 2)
		enqueueN(t, q, "run", 1)
		if err := q.Pause(ctx, "p"); err != nil {
			t.Fatal(err)
		}
		c := newClaimer(t, q)
		if got := claim(t, c, "p", 5); len(got) != 0 {
			t.Fatalf("%v: claimed %d jobs of a paused queue", s, len(got))
		}
		st, err := q.Stats(ctx)
		if err != nil || len(st) != 2 {
			t.Fatalf("%v: Stats = %+v, %v", s, st, err)
		}
		if !st[0].Paused || st[0].Ready != 2 || st[1].Paused {
			t.Fatalf("%v: Stats = %+v; want p paused with 2 ready, run not paused", s, st)
		}
		if err := q.Resume(ctx, "p"); err != nil {
			t.Fatal(err)
		}
		got := claim(t, c, "p", 5)
		if len(got) != 2 {
			t.Fatalf("%v: claimed %d jobs after Resume, want 2", s, len(got))
		}
		if err := c.Complete(context.Background(), leases(got)); err != nil {
			t.Fatal(err)
		}
	}
}
