package mysql

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

func TestClaimOrderAndRunAt(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t, Config{}, true)
	ctx := context.Background()
	past := time.Now().Add(-time.Hour)
	// Enqueued out of order: want priority, then run_at, then id.
	_, err := q.Enqueue(ctx,
		queue.NewJob{Queue: "q", Payload: []byte("p1-late"), Priority: 1, RunAt: past.Add(2 * time.Minute)},
		queue.NewJob{Queue: "q", Payload: []byte("p0-late"), Priority: 0, RunAt: past.Add(time.Minute)},
		queue.NewJob{Queue: "q", Payload: []byte("future"), Priority: -5, Delay: time.Hour},
		queue.NewJob{Queue: "q", Payload: []byte("p0-early"), Priority: 0, RunAt: past},
		queue.NewJob{Queue: "q", Payload: []byte("p1-early-a"), Priority: 1, RunAt: past},
		queue.NewJob{Queue: "q", Payload: []byte("p1-early-b"), Priority: 1, RunAt: past},
		queue.NewJob{Queue: "other", Payload: []byte("other"), Priority: -9},
		queue.NewJob{Queue: "q", Payload: []byte("pneg-now"), Priority: -1},
	)
	if err != nil {
		t.Fatal(err)
	}
	c := newClaimer(t, q)
	var got []string
	for {
		jobs, err := c.Claim(ctx, "q", 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) == 0 {
			break
		}
		got = append(got, string(jobs[0].Payload))
	}
	want := []string{"pneg-now", "p0-early", "p0-late", "p1-early-a", "p1-early-b", "p1-late"}
	if !slices.Equal(got, want) {
		t.Fatalf("claim order %q, want %q (the future job must not come)", got, want)
	}

	// A batch comes back sorted the same way, with its lease.
	q2, _ := openQueue(t, Config{}, true)
	for i := 3; i > 0; i-- {
		if _, err := q2.Enqueue(ctx, queue.NewJob{Queue: "q", Payload: []byte{byte(i)}, Priority: int16(i)}); err != nil {
			t.Fatal(err)
		}
	}
	c2 := newClaimer(t, q2)
	before := time.Now()
	jobs, err := c2.Claim(ctx, "q", 10)
	if err != nil || len(jobs) != 3 {
		t.Fatalf("Claim: %d jobs, %v", len(jobs), err)
	}
	for i, j := range jobs {
		if j.Priority != int16(i+1) || j.State != queue.StateClaimed || j.Token == 0 || j.Attempt != 0 ||
			j.MaxAttempts != queue.DefaultMaxAttempts || j.Queue != "q" {
			t.Errorf("job %d: %+v", i, j)
		}
		if d := j.ClaimedUntil.Sub(before); d < queue.DefaultLease-time.Minute || d > queue.DefaultLease+time.Minute {
			t.Errorf("job %d: lease ends %v, %v after the claim", i, j.ClaimedUntil, d)
		}
		if j.ClaimedUntil.Location() != time.UTC || j.RunAt.Location() != time.UTC {
			t.Errorf("job %d: times not in UTC", i)
		}
	}
}

func TestClaimValidation(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t, Config{}, true)
	c := newClaimer(t, q)
	ctx := context.Background()
	if _, err := c.Claim(ctx, "q", 0); !errors.Is(err, queue.ErrInvalidLimit) {
		t.Errorf("n=0: %v", err)
	}
	if _, err := c.Claim(ctx, "bad queue", 1); !errors.Is(err, queue.ErrInvalidQueue) {
		t.Errorf("bad queue: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Claim(cancelled, "q", 1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Claim(ctx, "q", 1); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("closed: %v", err)
	}
	if err := c.Complete(ctx, []queue.Lease{{ID: 1, Token: 1}}); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("closed complete: %v", err)
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	t.Parallel()
	payloads := [][]byte{
		{},
		{0},
		[]byte("a\x00b\x00"),
		{0xff, 0xfe, 0x80, 0xc3, 0x28},        // invalid UTF-8
		[]byte("'; DROP TABLE x; -- \\ \" `"), // quoting
		[]byte("é日本\U0001F600"),
		bytes.Repeat([]byte{0, 1, 2, 0xff}, 64<<10),
	}
	// Through Open (interpolated parameters) and through New on a plain
	// DSN without parseTime (binary protocol, times as text).
	for _, via := range []string{"open", "new"} {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			var q *queue.Queue
			if via == "open" {
				q, _ = openQueue(t, Config{}, true)
			} else {
				q = newPlainQueue(t, Config{})
			}
			ctx := context.Background()
			var jobs []queue.NewJob
			for _, p := range payloads {
				jobs = append(jobs, queue.NewJob{Queue: "q", Payload: p, DedupeKey: string(p[:min(len(p), 5)]) + via})
			}
			jobs[0].DedupeKey = "" // no key
			ids, err := q.Enqueue(ctx, jobs...)
			if err != nil {
				t.Fatal(err)
			}
			c := newClaimer(t, q)
			got, err := c.Claim(ctx, "q", 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(payloads) {
				t.Fatalf("claimed %d, want %d", len(got), len(payloads))
			}
			for i, j := range got {
				if j.ID != ids[i] {
					t.Errorf("job %d: id %d, Enqueue said %d", i, j.ID, ids[i])
				}
				if !bytes.Equal(j.Payload, payloads[i]) || j.Payload == nil {
					t.Errorf("job %d: payload %q, want %q", i, trunc(j.Payload), trunc(payloads[i]))
				}
				if j.DedupeKey != jobs[i].DedupeKey {
					t.Errorf("job %d: dedupe key %q, want %q", i, j.DedupeKey, jobs[i].DedupeKey)
				}
				if time.Since(j.CreatedAt).Abs() > time.Minute || time.Since(j.RunAt).Abs() > time.Minute {
					t.Errorf("job %d: created %v run_at %v: not now in UTC", i, j.CreatedAt, j.RunAt)
				}
			}
		})
	}
}

func trunc(b []byte) []byte { return b[:min(len(b), 16)] }

// TestEnqueueIDsUnderConcurrency checks every id Enqueue returns against
// its row while several producers insert at once, with the ids derived
// from LAST_INSERT_ID() (innodb_autoinc_lock_mode 0 and 1) and found by the
// per-batch marker (mode 2, MySQL 8's default; forced here).
func TestEnqueueIDsUnderConcurrency(t *testing.T) {
	t.Parallel()
	for _, marker := range []bool{false, true} {
		t.Run(fmt.Sprintf("marker=%v", marker), func(t *testing.T) {
			t.Parallel()
			testEnqueueIDs(t, marker)
		})
	}
}

func testEnqueueIDs(t *testing.T, marker bool) {
	q, d := openQueue(t, Config{}, true)
	d.idsByMarker = d.idsByMarker || marker
	ctx := context.Background()
	// Concurrent multi-row INSERTs: each returned id must name the row
	// with the payload it was given.
	var (
		mu  sync.Mutex
		all = map[int64]string{}
		wg  sync.WaitGroup
	)
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range 20 {
				n := 1 + (b*7+p)%60
				var jobs []queue.NewJob
				for i := range n {
					jobs = append(jobs, queue.NewJob{Queue: "q", Payload: fmt.Appendf(nil, "%d/%d/%d", p, b, i)})
				}
				ids, err := q.Enqueue(ctx, jobs...)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for i, id := range ids {
					if _, dup := all[id]; dup {
						t.Errorf("id %d returned twice", id)
					}
					all[id] = string(jobs[i].Payload)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	rows, err := q.Driver().(*Driver).DB().Query("SELECT id, payload FROM dbq_jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id int64
		var p []byte
		if err := rows.Scan(&id, &p); err != nil {
			t.Fatal(err)
		}
		if all[id] != string(p) {
			t.Errorf("row %d holds %q, Enqueue returned that id for %q", id, p, all[id])
		}
		n++
	}
	if n != len(all) {
		t.Errorf("%d rows, %d ids", n, len(all))
	}
}

func TestEnqueueTx(t *testing.T) {
	t.Parallel()
	q, d := openQueue(t, Config{}, true)
	ctx := context.Background()

	tx, err := d.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueTx(ctx, tx, queue.NewJob{Queue: "q", Payload: []byte("rolled back")}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	tx, err = d.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := q.EnqueueTx(ctx, tx, queue.NewJob{Queue: "q", Payload: []byte("committed")})
	if err != nil {
		t.Fatal(err)
	}
	c := newClaimer(t, q)
	if jobs, err := c.Claim(ctx, "q", 10); err != nil || len(jobs) != 0 {
		t.Fatalf("uncommitted job visible: %d jobs, %v", len(jobs), err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Claim(ctx, "q", 10)
	if err != nil || len(jobs) != 1 || string(jobs[0].Payload) != "committed" || jobs[0].ID != ids[0] {
		t.Fatalf("after commit: %v, %v", jobs, err)
	}

	if _, err := q.EnqueueTx(ctx, "not a tx", queue.NewJob{Queue: "q"}); !errors.Is(err, queue.ErrUnsupportedTx) {
		t.Errorf("string tx: %v", err)
	}
	cn, err := d.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cn.Close()
	if _, err := q.EnqueueTx(ctx, cn, queue.NewJob{Queue: "q"}); !errors.Is(err, queue.ErrUnsupportedTx) {
		t.Errorf("*sql.Conn: %v", err)
	}
}

func TestEnqueueAtomicAndDuplicate(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t, Config{}, true)
	ctx := context.Background()
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "q", DedupeKey: "k"}); err != nil {
		t.Fatal(err)
	}
	// Same key in another queue: fine.
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "q2", DedupeKey: "k"}); err != nil {
		t.Fatal(err)
	}
	// A batch (several INSERTs in one transaction) with a collision at the
	// end inserts nothing.
	var jobs []queue.NewJob
	for i := range 2500 {
		jobs = append(jobs, queue.NewJob{Queue: "q", Payload: fmt.Appendf(nil, "%d", i)})
	}
	jobs = append(jobs, queue.NewJob{Queue: "q", DedupeKey: "k"})
	if _, err := q.Enqueue(ctx, jobs...); !errors.Is(err, queue.ErrDuplicate) {
		t.Fatalf("duplicate: %v", err)
	}
	// And one INSERT alone (autocommit).
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "q"}, queue.NewJob{Queue: "q", DedupeKey: "k"}); !errors.Is(err, queue.ErrDuplicate) {
		t.Fatalf("duplicate: %v", err)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 || st[0].Queue != "q" || st[0].Ready != 1 || st[1].Ready != 1 {
		t.Fatalf("stats after failed enqueues: %+v", st)
	}
	// The key is free again once its job completes.
	c := newClaimer(t, q)
	got, err := c.Claim(ctx, "q", 10)
	if err != nil || len(got) != 1 {
		t.Fatal(len(got), err)
	}
	if err := c.Complete(ctx, leases(got)); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "q", DedupeKey: "k"}); err != nil {
		t.Fatalf("key not free after complete: %v", err)
	}
}

func TestNotMigrated(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t, Config{}, false)
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, queue.ErrNotMigrated) {
			t.Errorf("%s: %v, want ErrNotMigrated", what, err)
		} else if !bytes.Contains([]byte(err.Error()), []byte("dbq migrate up")) {
			t.Errorf("%s: %q does not name `dbq migrate up`", what, err)
		}
	}
	_, err := q.Enqueue(ctx, queue.NewJob{Queue: "q"})
	check("Enqueue", err)
	_, err = q.Stats(ctx)
	check("Stats", err)
	c := newClaimer(t, q)
	_, err = c.Claim(ctx, "q", 1)
	check("Claim", err)
	check("Complete", c.Complete(ctx, []queue.Lease{{ID: 1, Token: 1}}))
	_, err = q.Driver().(*Driver).Rescue(ctx)
	check("Rescue", err)
}

func TestLeaseLifecycle(t *testing.T) {
	t.Parallel()
	lease := 2 * time.Second
	q, d := openQueue(t, Config{Config: queue.Config{Lease: lease}}, true)
	ctx := context.Background()
	ids := enqueueN(t, q, "q", 3, "j")
	a := newClaimer(t, q)
	held, err := a.Claim(ctx, "q", 10)
	if err != nil || len(held) != 3 {
		t.Fatal(len(held), err)
	}
	b := newClaimer(t, q)
	if got, err := b.Claim(ctx, "q", 10); err != nil || len(got) != 0 {
		t.Fatalf("held jobs claimed again: %d, %v", len(got), err)
	}
	// Keep job 0 alive with Extend; let 1 and 2 expire.
	deadline := time.Now().Add(lease + 500*time.Millisecond)
	for time.Now().Before(deadline) {
		if err := a.Extend(ctx, leases(held[:1])); err != nil {
			t.Fatal(err)
		}
		time.Sleep(lease / 4)
	}
	n, err := d.Rescue(ctx)
	if err != nil || n != 2 {
		t.Fatalf("Rescue: %d, %v (want 2)", n, err)
	}
	got, err := b.Claim(ctx, "q", 10)
	if err != nil || len(got) != 2 || got[0].ID != ids[1] || got[1].ID != ids[2] {
		t.Fatalf("after expiry: %v, %v", got, err)
	}
	if got[0].Attempt != 1 || got[0].LastError == "" {
		t.Errorf("rescued job: attempt %d, last error %q", got[0].Attempt, got[0].LastError)
	}
	// a's stale leases change nothing and say so.
	err = a.Complete(ctx, leases(held))
	var lost *queue.LeaseLostError
	if !errors.As(err, &lost) || !errors.Is(err, queue.ErrLeaseLost) || !slices.Equal(lost.IDs, []int64{ids[1], ids[2]}) {
		t.Fatalf("stale complete: %v", err)
	}
	// Job 0 was completed by that call (its lease was extended).
	st, _ := q.Stats(ctx)
	if len(st) != 1 || st[0].Held != 2 || st[0].Ready != 0 {
		t.Fatalf("stats: %+v", st)
	}
	for _, op := range []func([]queue.Lease) error{
		func(l []queue.Lease) error { return a.Release(ctx, l) },
		func(l []queue.Lease) error { return a.Extend(ctx, l) },
		func(l []queue.Lease) error {
			return a.Retry(ctx, []queue.RetryParams{{Lease: l[0], Error: "x"}, {Lease: l[1], Error: "y"}})
		},
	} {
		if err := op(leases(held[1:])); !errors.Is(err, queue.ErrLeaseLost) {
			t.Errorf("stale lease: %v", err)
		}
	}
	// b's leases are intact.
	if err := b.Complete(ctx, leases(got)); err != nil {
		t.Fatal(err)
	}
}

func TestRescueInsideClaim(t *testing.T) {
	t.Parallel()
	lease := 800 * time.Millisecond
	q, _ := openQueue(t, Config{Config: queue.Config{Lease: lease}}, true)
	ctx := context.Background()
	enqueueN(t, q, "q", 5, "j")
	a := newClaimer(t, q)
	if got, err := a.Claim(ctx, "q", 10); err != nil || len(got) != 5 {
		t.Fatal(len(got), err)
	}
	killConn(t, a.connID) // a dies holding all five
	b := newClaimer(t, q)
	deadline := time.Now().Add(10 * lease)
	total := 0
	for total < 5 && time.Now().Before(deadline) {
		got, err := b.Claim(ctx, "q", 10)
		if err != nil {
			t.Fatal(err)
		}
		total += len(got)
		time.Sleep(lease / 8)
	}
	if total != 5 {
		t.Fatalf("claim gave back %d of 5 jobs of a dead claimer", total)
	}
}

func TestRetryAndDead(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t, Config{}, true)
	ctx := context.Background()
	_, err := q.Enqueue(ctx,
		queue.NewJob{Queue: "q", Payload: []byte("a"), MaxAttempts: 2},
		queue.NewJob{Queue: "q", Payload: []byte("b"), MaxAttempts: 5},
		queue.NewJob{Queue: "q", Payload: []byte("c"), MaxAttempts: 5})
	if err != nil {
		t.Fatal(err)
	}
	c := newClaimer(t, q)
	jobs, err := c.Claim(ctx, "q", 3)
	if err != nil || len(jobs) != 3 {
		t.Fatal(len(jobs), err)
	}
	long := string(bytes.Repeat([]byte("é"), queue.MaxErrorBytes)) + "\xff"
	err = c.Retry(ctx, []queue.RetryParams{
		{Lease: jobs[0].Lease(), Error: "boom a"},
		{Lease: jobs[1].Lease(), Error: long, Delay: time.Hour},
		{Lease: jobs[2].Lease(), Error: "fatal", Dead: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Claim(ctx, "q", 3)
	if err != nil || len(got) != 1 || string(got[0].Payload) != "a" || got[0].Attempt != 1 || got[0].LastError != "boom a" {
		t.Fatalf("after retry: %v %v", got, err)
	}
	if err := c.Retry(ctx, []queue.RetryParams{{Lease: got[0].Lease(), Error: "boom again"}}); err != nil {
		t.Fatal(err)
	}
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 1 || st[0].Dead != 2 || st[0].Scheduled != 1 || st[0].Ready != 0 || st[0].Held != 0 {
		t.Fatalf("stats: %+v", st)
	}
	var lastErr string
	if err := q.Driver().(*Driver).DB().QueryRow("SELECT last_error FROM dbq_jobs WHERE id = ?", jobs[1].ID).Scan(&lastErr); err != nil {
		t.Fatal(err)
	}
	if len(lastErr) > queue.MaxErrorBytes || len(lastErr) < queue.MaxErrorBytes-2 {
		t.Errorf("last_error kept %d bytes", len(lastErr))
	}
}

func TestReleaseAndClose(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t, Config{}, true)
	ctx := context.Background()
	enqueueN(t, q, "q", 4, "j")
	a := newClaimer(t, q)
	jobs, err := a.Claim(ctx, "q", 4)
	if err != nil || len(jobs) != 4 {
		t.Fatal(len(jobs), err)
	}
	if err := a.Release(ctx, leases(jobs[:1])); err != nil {
		t.Fatal(err)
	}
	if err := a.Complete(ctx, leases(jobs[1:2])); err != nil {
		t.Fatal(err)
	}
	// Close gives back the two still held.
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b := newClaimer(t, q)
	got, err := b.Claim(ctx, "q", 10)
	if err != nil || len(got) != 3 {
		t.Fatalf("after close: %d, %v", len(got), err)
	}
	for _, j := range got {
		if j.Attempt != 0 {
			t.Errorf("released job %d spent an attempt", j.ID)
		}
	}
}

// TestExactlyOnce: 16 claimers (each its own Queue, as separate processes
// would be) and 2 producers, 20,000 jobs, each completed exactly once.
func TestExactlyOnce(t *testing.T) {
	t.Parallel()
	const (
		total     = 20000
		producers = 2
		claimers  = 16
	)
	_, dsn := newDatabase(t)
	q0, _ := openQueueOn(t, dsn, Config{}, true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var (
		ledger   sync.Map // id -> claimer
		dups     atomic.Int64
		done     atomic.Int64
		enqueued atomic.Int64
		wg       sync.WaitGroup
	)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; b < total/producers; b += 100 {
				var jobs []queue.NewJob
				for i := range 100 {
					jobs = append(jobs, queue.NewJob{Queue: "q", Payload: fmt.Appendf(nil, "%d-%d", p, b+i)})
				}
				if _, err := q0.Enqueue(ctx, jobs...); err != nil {
					t.Error(err)
					return
				}
				enqueued.Add(100)
			}
		}()
	}
	var empties, attempts atomic.Int64
	for w := range claimers {
		q, _ := openQueueOn(t, dsn, Config{}, false)
		c := newClaimer(t, q)
		wg.Add(1)
		go func() {
			defer wg.Done()
			idle := time.Millisecond
			for done.Load() < total && ctx.Err() == nil {
				jobs, err := c.Claim(ctx, "q", 50)
				if err != nil {
					t.Error(err)
					return
				}
				if len(jobs) == 0 {
					time.Sleep(idle)
					idle = min(2*idle, 20*time.Millisecond)
					continue
				}
				idle = time.Millisecond
				for _, j := range jobs {
					if prev, loaded := ledger.LoadOrStore(j.ID, w); loaded {
						dups.Add(1)
						t.Errorf("job %d claimed by %d and %d", j.ID, prev, w)
					}
				}
				if err := c.Complete(ctx, leases(jobs)); err != nil {
					t.Error(err)
					return
				}
				done.Add(int64(len(jobs)))
			}
			e, a := c.EmptyLocks()
			empties.Add(e)
			attempts.Add(a)
		}()
	}
	wg.Wait()
	if n := done.Load(); n != total {
		t.Fatalf("completed %d of %d", n, total)
	}
	st, err := q0.Stats(context.Background())
	if err != nil || len(st) != 0 {
		t.Fatalf("left over: %+v %v", st, err)
	}
	t.Logf("%d jobs, %d claimers: %d duplicates, %d of %d claim attempts locked nothing",
		total, claimers, dups.Load(), empties.Load(), attempts.Load())
}

// TestClaimLocksOnlyWhatItReturns checks the locks of claim transactions
// from inside them (a test hook between UPDATE and COMMIT), with a large
// backlog and concurrent claimers churning the head of the claim index.
//
// INNODB_TRX.trx_rows_locked is approximate: InnoDB counts a row that a
// locking read locked and let go at once because it failed the WHERE (a
// sampled candidate another claimer took or completed meanwhile) and does
// not always take the count back ("since delete-marked records may be
// removed, the record count will not be precise", lock0lock.h). So every
// claim is checked against len(jobs) <= trx_rows_locked <= len(sampled):
// nothing outside the sample is ever locked (under REPEATABLE READ, or with
// a claim that walks the claim index, a 100-row claim locks thousands).
// Where the server shows the locks themselves — MySQL's
// performance_schema.data_locks, or MariaDB's SHOW ENGINE INNODB STATUS
// when innodb_status_output_locks=ON (the test reads that setting, never
// sets it) — the claim must hold exactly its jobs' row locks.
// TestClaimLocksExactly covers the precise count without concurrency.
func TestClaimLocksOnlyWhatItReturns(t *testing.T) {
	t.Parallel()
	innodbOnly(t)
	_, dsn := newDatabase(t)
	q0, d0 := openQueueOn(t, dsn, Config{}, true)
	enqueueN(t, q0, "q", 30000, "j")
	ctx := context.Background()
	var (
		wg                     sync.WaitGroup
		checks, exact, precise atomic.Int64
		claimed                atomic.Int64 // claims that returned jobs: each must have been checked
	)
	for range 4 {
		q, _ := openQueueOn(t, dsn, Config{}, false)
		c := newClaimer(t, q)
		var mu sync.Mutex
		var problems []string
		c.inTx = func(ctx context.Context, connID int64, sampled []int64, jobs []*queue.Job) {
			n, err := rowsLocked(ctx, connID, len(jobs))
			held, shown, perr := heldRowLocks(ctx, d0, connID)
			mu.Lock()
			defer mu.Unlock()
			checks.Add(1)
			switch {
			case err != nil || perr != nil:
				problems = append(problems, fmt.Sprint(err, perr))
			case n < int64(len(jobs)) || n > int64(len(sampled)):
				problems = append(problems, fmt.Sprintf("claim of %d jobs from %d sampled candidates: trx_rows_locked %d",
					len(jobs), len(sampled), n))
			case shown && held != int64(len(jobs)):
				problems = append(problems, fmt.Sprintf("claim of %d jobs holds %d row locks", len(jobs), held))
			}
			if n == int64(len(jobs)) {
				exact.Add(1)
			}
			if shown {
				precise.Add(1)
			}
		}
		// A busy neighbour without the hook keeps the head of the index
		// churning.
		busy := newClaimer(t, q)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 8 {
				jobs, err := c.Claim(ctx, "q", 100)
				if err != nil {
					t.Error(err)
					return
				}
				if len(jobs) > 0 {
					claimed.Add(1)
				}
				if err := c.Complete(ctx, leases(jobs)); err != nil {
					t.Error(err)
					return
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, p := range problems {
				t.Error(p)
			}
		}()
		go func() {
			defer wg.Done()
			for range 40 {
				jobs, err := busy.Claim(ctx, "q", 100)
				if err != nil {
					t.Error(err)
					return
				}
				if err := busy.Complete(ctx, leases(jobs)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// A claim whose sampled candidates the busy neighbours all took first
	// returns nothing and has nothing to check; under load a few do.
	if checks.Load() != claimed.Load() || checks.Load() < 4*8/2 {
		t.Fatalf("%d claims checked of %d that returned jobs (of %d made)", checks.Load(), claimed.Load(), 4*8)
	}
	t.Logf("%d claims checked: trx_rows_locked exact in %d; lock lists shown by the server in %d",
		checks.Load(), exact.Load(), precise.Load())
}

// TestClaimLocksExactly: with no other transaction running, a claim whose
// sample holds every kind of row it must not take — held, completed, dead,
// scheduled, another queue's — locks exactly the rows it returns, as
// trx_rows_locked counts them.
func TestClaimLocksExactly(t *testing.T) {
	t.Parallel()
	innodbOnly(t)
	q, d := openQueue(t, Config{}, true)
	ctx := context.Background()
	ids := enqueueN(t, q, "q", 500, "j")
	later, err := q.Enqueue(ctx, queue.NewJob{Queue: "q", Delay: time.Hour}, queue.NewJob{Queue: "q", Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	other, err := q.Enqueue(ctx, queue.NewJob{Queue: "other"}, queue.NewJob{Queue: "other"})
	if err != nil {
		t.Fatal(err)
	}
	b := newClaimer(t, q)
	taken, err := b.Claim(ctx, "q", 60) // ids[0:60]
	if err != nil || len(taken) != 60 {
		t.Fatal(len(taken), err)
	}
	if err := b.Complete(ctx, leases(taken[:20])); err != nil { // ids[0:20] gone
		t.Fatal(err)
	}
	if err := b.Retry(ctx, []queue.RetryParams{{Lease: taken[20].Lease(), Dead: true}}); err != nil { // ids[20] dead
		t.Fatal(err)
	}
	// ids[21:60] held by b.
	sampled := slices.Concat(ids[0:80], later, other, []int64{1 << 40})
	a := newClaimer(t, q)
	tx, err := beginRC(ctx, a.conn)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	jobs, err := a.lock(ctx, tx, sampled, "q", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 20 || jobs[0].ID != ids[60] {
		t.Fatalf("locked %d jobs, want ids[60:80]", len(jobs))
	}
	n, err := rowsLocked(ctx, a.connID, 0)
	if err != nil || n != 20 {
		t.Fatalf("trx_rows_locked %d (%v), want 20", n, err)
	}
	if held, shown, err := heldRowLocks(ctx, d, a.connID); err != nil || (shown && held != 20) {
		t.Fatalf("row locks held: %d (%v), want 20", held, err)
	}
}

// countGone counts the ids no longer in the table.
func countGone(ctx context.Context, d *Driver, ids []int64) (int64, error) {
	var present int64
	q := "SELECT COUNT(*) FROM " + d.stmts.jobsTable + " WHERE id IN (" +
		strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + ")"
	if err := d.DB().QueryRowContext(ctx, q, anys(ids)...).Scan(&present); err != nil {
		return 0, err
	}
	return int64(len(ids)) - present, nil
}

func TestCancelledClaimLeavesNothing(t *testing.T) {
	t.Parallel()
	innodbOnly(t)
	q, _ := openQueue(t, Config{}, true)
	enqueueN(t, q, "q", 10, "j")
	c := newClaimer(t, q)
	ctx, cancel := context.WithCancel(context.Background())
	c.inTx = func(context.Context, int64, []int64, []*queue.Job) { cancel() }
	if _, err := c.Claim(ctx, "q", 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled mid-claim: %v", err)
	}
	if left := openTrx(t, c.connID); len(left) > 0 {
		t.Fatalf("left open: %v", left)
	}
	c.inTx = nil
	got, err := c.Claim(context.Background(), "q", 10)
	if err != nil || len(got) != 10 {
		t.Fatalf("after a cancelled claim: %d jobs, %v (the claim must have been rolled back)", len(got), err)
	}
}

func TestKilledConnectionReconnects(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t, Config{}, true)
	enqueueN(t, q, "q", 10, "j")
	c := newClaimer(t, q)
	old := c.connID
	killConn(t, old)
	got, err := c.Claim(context.Background(), "q", 10)
	if err != nil || len(got) != 10 {
		t.Fatalf("after the session was killed: %d jobs, %v", len(got), err)
	}
	if c.connID == old {
		t.Fatal("same session id after a kill")
	}
}

// TestCompleteClaimInOneTransaction: CompleteClaim deletes the completed
// jobs inside the claim's own transaction — seen from the server, that
// transaction has modified the completed rows and the claimed ones before
// it commits — and both take effect with its COMMIT.
func TestCompleteClaimInOneTransaction(t *testing.T) {
	t.Parallel()
	innodbOnly(t)
	q, d := openQueue(t, Config{}, true)
	ctx := context.Background()
	enqueueN(t, q, "q", 10, "j")
	c := newClaimer(t, q)
	mine, err := c.Claim(ctx, "q", 4)
	if err != nil || len(mine) != 4 {
		t.Fatal(len(mine), err)
	}
	var seen error
	c.inTx = func(ctx context.Context, connID int64, _ []int64, jobs []*queue.Job) {
		// Returns once the open transaction has modified the 4 completed
		// rows and the claimed ones, or fails.
		_, seen = rowsLocked(ctx, connID, len(mine)+len(jobs))
	}
	res := c.CompleteClaim(ctx, queue.CompleteClaimParams{Complete: leases(mine), Queue: "q", N: 3})
	c.inTx = nil
	if res.CompleteErr != nil || res.ClaimErr != nil || len(res.Jobs) != 3 {
		t.Fatalf("CompleteClaim: complete %v, claim %d jobs %v", res.CompleteErr, len(res.Jobs), res.ClaimErr)
	}
	if seen != nil {
		t.Fatalf("the claim transaction did not carry the completions: %v", seen)
	}
	if gone, err := countGone(ctx, d, queue.IDs(mine)); err != nil || gone != 4 {
		t.Fatalf("%d of the 4 completed jobs gone (%v)", gone, err)
	}
	if s := queueStats(t, q, "q"); s.Ready != 3 || s.Held != 3 {
		t.Fatalf("ready %d held %d, want 3 and 3", s.Ready, s.Held)
	}
	if err := c.Complete(ctx, leases(mine)); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("completing them again: %v, want their leases lost", err)
	}
}

// TestCompleteClaimCommitsCompletionWhenClaimFails: when the claim
// transaction that carries the completions does not commit — here its
// session is killed after the DELETE and the claim's UPDATE, before
// COMMIT — the completions still end committed (written alone), the
// claim part reports its error, and the jobs it had taken are ready again.
func TestCompleteClaimCommitsCompletionWhenClaimFails(t *testing.T) {
	t.Parallel()
	innodbOnly(t)
	q, d := openQueue(t, Config{}, true)
	ctx := context.Background()
	enqueueN(t, q, "q", 10, "j")
	c := newClaimer(t, q)
	mine, err := c.Claim(ctx, "q", 4)
	if err != nil || len(mine) != 4 {
		t.Fatal(len(mine), err)
	}
	var kills atomic.Int64
	c.inTx = func(_ context.Context, connID int64, _ []int64, _ []*queue.Job) {
		kills.Add(1)
		killConn(t, connID)
	}
	res := c.CompleteClaim(ctx, queue.CompleteClaimParams{Complete: leases(mine), Queue: "q", N: 3})
	c.inTx = nil
	if res.ClaimErr == nil || len(res.Jobs) != 0 || kills.Load() == 0 {
		t.Fatalf("claim part with its session killed: %d jobs, %v (%d kills)", len(res.Jobs), res.ClaimErr, kills.Load())
	}
	if res.CompleteErr != nil {
		t.Fatalf("complete part: %v, want it written alone", res.CompleteErr)
	}
	if gone, err := countGone(ctx, d, queue.IDs(mine)); err != nil || gone != 4 {
		t.Fatalf("%d of the 4 completed jobs gone (%v), want all", gone, err)
	}
	if s := queueStats(t, q, "q"); s.Ready != 6 || s.Held != 0 {
		t.Fatalf("ready %d held %d, want 6 and 0: the failed claim must have taken nothing", s.Ready, s.Held)
	}
	if got, err := c.Claim(ctx, "q", 10); err != nil || len(got) != 6 {
		t.Fatalf("after the failed claim: %d jobs, %v", len(got), err)
	}
}

// TestCompleteClaimReportsLostLease: a lease that is not this holder's
// makes the completion part report exactly it in a *queue.LeaseLostError,
// as Complete does, while the others are completed, the job of the stray
// lease stays with its holder, and the claim part claims.
func TestCompleteClaimReportsLostLease(t *testing.T) {
	t.Parallel()
	q, d := openQueue(t, Config{}, true)
	ctx := context.Background()
	enqueueN(t, q, "q", 10, "j")
	a, b := newClaimer(t, q), newClaimer(t, q)
	mine, err := a.Claim(ctx, "q", 3)
	if err != nil || len(mine) != 3 {
		t.Fatal(len(mine), err)
	}
	theirs, err := b.Claim(ctx, "q", 1)
	if err != nil || len(theirs) != 1 {
		t.Fatal(len(theirs), err)
	}
	stray := queue.Lease{ID: theirs[0].ID, Token: mine[0].Token}
	res := a.CompleteClaim(ctx, queue.CompleteClaimParams{Complete: append(leases(mine), stray), Queue: "q", N: 4})
	var lost *queue.LeaseLostError
	if !errors.As(res.CompleteErr, &lost) || !slices.Equal(lost.IDs, []int64{stray.ID}) {
		t.Fatalf("complete part: %v, want only the lease of job %d lost", res.CompleteErr, stray.ID)
	}
	if res.ClaimErr != nil || len(res.Jobs) != 4 {
		t.Fatalf("claim part: %d jobs, %v; want 4", len(res.Jobs), res.ClaimErr)
	}
	if gone, err := countGone(ctx, d, queue.IDs(mine)); err != nil || gone != 3 {
		t.Fatalf("%d of the 3 completed jobs gone (%v)", gone, err)
	}
	if err := b.Complete(ctx, leases(theirs)); err != nil {
		t.Fatalf("the stray lease's holder: %v", err)
	}
	if s := queueStats(t, q, "q"); s.Ready != 2 || s.Held != 4 {
		t.Fatalf("ready %d held %d, want 2 and 4", s.Ready, s.Held)
	}
}

// TestCompleteClaimAfterLockWaitTimeout: a claim attempt whose carried
// DELETE waits on a row another transaction holds fails with a lock wait
// timeout (1205) and is rolled back; the completions are then written
// alone (Complete retries until the row is free) and the claim, retried,
// takes its jobs.
func TestCompleteClaimAfterLockWaitTimeout(t *testing.T) {
	t.Parallel()
	innodbOnly(t)
	q, d := openQueue(t, Config{LockWaitTimeout: time.Second}, true)
	ctx := context.Background()
	enqueueN(t, q, "q", 10, "j")
	c := newClaimer(t, q)
	mine, err := c.Claim(ctx, "q", 4)
	if err != nil || len(mine) != 4 {
		t.Fatal(len(mine), err)
	}
	// Another session holds the row of one completed job for 1.5 s.
	tx, err := d.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var id int64
	if err := tx.QueryRowContext(ctx, "SELECT id FROM "+d.stmts.jobsTable+" WHERE id = ? FOR UPDATE", mine[2].ID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(1500*time.Millisecond, func() { _ = tx.Rollback() })
	retried := d.retried.Load()
	res := c.CompleteClaim(ctx, queue.CompleteClaimParams{Complete: leases(mine), Queue: "q", N: 3})
	if res.CompleteErr != nil || res.ClaimErr != nil || len(res.Jobs) != 3 {
		t.Fatalf("CompleteClaim: complete %v, claim %d jobs %v", res.CompleteErr, len(res.Jobs), res.ClaimErr)
	}
	if d.retried.Load() == retried {
		t.Fatal("nothing waited out a lock wait timeout: the test did not test it")
	}
	if gone, err := countGone(ctx, d, queue.IDs(mine)); err != nil || gone != 4 {
		t.Fatalf("%d of the 4 completed jobs gone (%v)", gone, err)
	}
	if s := queueStats(t, q, "q"); s.Ready != 3 || s.Held != 3 {
		t.Fatalf("ready %d held %d, want 3 and 3", s.Ready, s.Held)
	}
}
