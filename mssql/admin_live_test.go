package mssql

// Live tests of the Admin statements and the rescue lock, beyond the
// conformance suite's cases; they run where DBQ_MSSQL_DSN answers.

import (
	"database/sql"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// While another session holds the table's rescue lock, a rescue pass
// moves nothing, even with an expired lease to move; once that session's
// transaction ends, the next pass moves it.
func TestLiveRescueOnePassAtATime(t *testing.T) {
	db := liveDB(t)
	ctx := liveCtx(t)
	q := newLiveQueue(t, db, Config{Config: queue.Config{Lease: time.Second}}, true)
	d := q.Driver().(*Driver)
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "r"}); err != nil {
		t.Fatal(err)
	}
	c, _ := q.NewClaimer(ctx)
	jobs, err := c.Claim(ctx, "r", 1)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Claim: %v, %v", jobs, err)
	}
	c.(*Claimer).kill()
	time.Sleep(1500 * time.Millisecond) // the lease expires

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var rc int
	if err := tx.QueryRowContext(ctx, `DECLARE @rc INT;
EXEC @rc = sys.sp_getapplock @Resource = @r, @LockMode = 'Exclusive', @LockOwner = 'Transaction', @LockTimeout = 0;
SELECT @rc;`, sql.Named("r", d.rescueLock)).Scan(&rc); err != nil || rc < 0 {
		t.Fatalf("take the rescue lock: %d, %v", rc, err)
	}
	if n, err := d.Rescue(ctx); err != nil || n != 0 {
		t.Fatalf("Rescue while another pass holds the lock = %d, %v; want 0, nil", n, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n, err := d.Rescue(ctx); err != nil || n != 1 {
		t.Fatalf("Rescue after = %d, %v; want 1", n, err)
	}
	if st, err := q.Stats(ctx); err != nil || len(st) != 1 || st[0].Ready != 1 || st[0].Held != 0 {
		t.Fatalf("stats %+v, %v; want the job ready again", st, err)
	}
}

// EnqueueUnique in the caller's transaction finds a job that transaction
// enqueued, and leaves the transaction usable.
func TestLiveEnqueueUniqueInCallerTx(t *testing.T) {
	db := liveDB(t)
	ctx := liveCtx(t)
	q := newLiveQueue(t, db, Config{}, true)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	ids, err := q.EnqueueTx(ctx, tx, queue.NewJob{Queue: "u", DedupeKey: "a"})
	if err != nil {
		t.Fatal(err)
	}
	id, existed, err := q.EnqueueUnique(ctx, tx, queue.NewJob{Queue: "u", DedupeKey: "a"})
	if err != nil || !existed || id != ids[0] {
		t.Fatalf("EnqueueUnique of a key the transaction holds = %d, %v, %v; want %d, true", id, existed, err, ids[0])
	}
	id2, existed, err := q.EnqueueUnique(ctx, tx, queue.NewJob{Queue: "u", DedupeKey: "b", Delay: time.Hour})
	if err != nil || existed || id2 == id {
		t.Fatalf("EnqueueUnique of a new key = %d, %v, %v", id2, existed, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit after EnqueueUnique: %v", err)
	}
	st, err := q.Stats(ctx)
	if err != nil || len(st) != 1 || st[0].Ready != 1 || st[0].Scheduled != 1 {
		t.Fatalf("stats %+v, %v; want 1 ready and 1 scheduled", st, err)
	}
	jobs, err := q.Jobs(ctx, queue.JobFilter{Queue: "u"})
	if err != nil || len(jobs) != 2 || jobs[0].DedupeKey != "a" || jobs[1].DedupeKey != "b" {
		t.Fatalf("Jobs = %v, %v", jobs, err)
	}
}
