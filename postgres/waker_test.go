package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

// wakeWait bounds waits for a wake-up that must come; it is generous
// because other tests load the machine, and no timing is asserted.
const wakeWait = 10 * time.Second

func waitWake(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(wakeWait):
		t.Fatalf("no wake-up %s", what)
	}
}

// drain empties ch and reports whether anything was in it after settle.
func woken(ch <-chan struct{}, settle time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(settle):
		return false
	}
}

func TestSubscribeFiresOnCommitOnly(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q := newQueue(t, Config{}, true)
	d := driverOf(t, q)
	wake, stop := d.Subscribe("w")
	defer stop()
	other, stopOther := d.Subscribe("other")
	defer stopOther()
	// The first wake-up says the listener is up.
	waitWake(t, wake, "once listening")
	waitWake(t, other, "once listening")

	tx, err := testPool(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueTx(ctx, tx, queue.NewJob{Queue: "w"}, queue.NewJob{Queue: "w"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// Rolled back: nothing may arrive. Follow with a committed enqueue on
	// another queue, so that once it has arrived the rollback's would
	// have too (one connection delivers notifications in commit order).
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "other"}); err != nil {
		t.Fatal(err)
	}
	waitWake(t, other, "after a commit on other")
	if woken(wake, 0) {
		t.Fatal("woken by a rolled-back enqueue")
	}

	tx, err = testPool(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := q.EnqueueTx(ctx, tx, queue.NewJob{Queue: "w"}); err != nil {
		t.Fatal(err)
	}
	if woken(wake, 50*time.Millisecond) {
		t.Fatal("woken before commit")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitWake(t, wake, "after commit")

	// database/sql and EnqueueUnique notify too; a collision does not.
	db := SQLDB(testPool(t))
	defer db.Close()
	stx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueTx(ctx, stx, queue.NewJob{Queue: "w"}); err != nil {
		t.Fatal(err)
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
	waitWake(t, wake, "after a database/sql commit")
	if _, _, err := q.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "w", DedupeKey: "k"}); err != nil {
		t.Fatal(err)
	}
	waitWake(t, wake, "after EnqueueUnique")

	stop()
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "w"}, queue.NewJob{Queue: "other"}); err != nil {
		t.Fatal(err)
	}
	waitWake(t, other, "after a commit on other")
	if woken(wake, 0) {
		t.Fatal("woken after stop")
	}
}

func TestSubscribeRecoversAfterTerminate(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q := newQueue(t, Config{}, true)
	d := driverOf(t, q)
	wake, stop := d.Subscribe("r")
	defer stop()
	waitWake(t, wake, "once listening")

	listen := "LISTEN " + dialect.Quote(dialect.Postgres, d.stmts.channel)
	var pid int32
	if err := testPool(t).QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE query = $1", listen).Scan(&pid); err != nil {
		t.Fatalf("find the listener's backend: %v", err)
	}
	var ok bool
	if err := testPool(t).QueryRow(ctx, "SELECT pg_terminate_backend($1, 5000)", pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend = %v, %v", ok, err)
	}
	// After the reconnect every subscriber is woken, as notifications may
	// have been missed.
	waitWake(t, wake, "after the reconnect")
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "r"}); err != nil {
		t.Fatal(err)
	}
	waitWake(t, wake, "after an enqueue on the new connection")
}

func TestNoNotify(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q := newQueue(t, Config{NoNotify: true}, true)
	d := driverOf(t, q)
	wake, stop := d.Subscribe("n")
	defer stop()
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "n"}); err != nil {
		t.Fatal(err)
	}
	if woken(wake, 100*time.Millisecond) {
		t.Fatal("woken with NoNotify")
	}
}

func TestChannelName(t *testing.T) {
	t.Parallel()
	short := channelName(`"dbq_jobs"`)
	long1 := channelName(`"` + strings.Repeat("s", 63) + `"."a_jobs"`)
	long2 := channelName(`"` + strings.Repeat("s", 63) + `"."b_jobs"`)
	if short != `dbq:"dbq_jobs"` || len(long1) > 63 || long1 == long2 {
		t.Fatalf("channel names %q %q %q", short, long1, long2)
	}
}
