package mysql

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// queueStats returns the stats of queue name (zero when it has no jobs).
func queueStats(t *testing.T, q *queue.Queue, name string) queue.QueueStats {
	t.Helper()
	all, err := q.Stats(context.Background())
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	for _, s := range all {
		if s.Queue == name {
			return s
		}
	}
	return queue.QueueStats{Queue: name}
}

func wantReadyHeld(t *testing.T, q *queue.Queue, name string, ready, held int64) {
	t.Helper()
	if s := queueStats(t, q, name); s.Ready != ready || s.Held != held {
		t.Fatalf("queue %s: %d ready, %d held; want %d and %d", name, s.Ready, s.Held, ready, held)
	}
}

// A collision inside the caller's transaction — with a committed job, or
// with one the same transaction stored — returns the existing job and
// leaves the transaction usable: its other work still commits. A rolled
// back unique enqueue frees its key.
func TestEnqueueUniqueInCallersTx(t *testing.T) {
	t.Parallel()
	q, d := openQueue(t, Config{}, true)
	ctx := context.Background()
	first, existed, err := q.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "u", DedupeKey: "k"})
	if err != nil || existed {
		t.Fatalf("EnqueueUnique = %d, %v, %v", first, existed, err)
	}

	tx, err := d.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	id, existed, err := q.EnqueueUnique(ctx, tx, queue.NewJob{Queue: "u", DedupeKey: "k"})
	if err != nil || !existed || id != first {
		t.Fatalf("EnqueueUnique(tx, committed key) = %d, %v, %v; want %d, true, nil", id, existed, err, first)
	}
	fresh, existed, err := q.EnqueueUnique(ctx, tx, queue.NewJob{Queue: "u", DedupeKey: "new"})
	if err != nil || existed || fresh == first {
		t.Fatalf("EnqueueUnique(tx, new key) = %d, %v, %v; want a new job", fresh, existed, err)
	}
	again, existed, err := q.EnqueueUnique(ctx, tx, queue.NewJob{Queue: "u", DedupeKey: "new"})
	if err != nil || !existed || again != fresh {
		t.Fatalf("EnqueueUnique(tx, key stored in tx) = %d, %v, %v; want %d, true, nil", again, existed, err, fresh)
	}
	plain, err := q.EnqueueTx(ctx, tx, queue.NewJob{Queue: "u", Payload: []byte("plain")})
	if err != nil {
		t.Fatalf("EnqueueTx after the collisions: %v", err)
	}
	// The caller's own statements still run in the transaction.
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+d.stmts.jobsTable+" WHERE queue = 'u'").Scan(&n); err != nil || n != 3 {
		t.Fatalf("the transaction sees %d jobs (%v), want 3", n, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	wantReadyHeld(t, q, "u", 3, 0)
	listed, err := q.Jobs(ctx, queue.JobFilter{Queue: "u"})
	if err != nil || !slices.Equal(queue.IDs(listed), []int64{first, fresh, plain[0]}) {
		t.Fatalf("jobs %v, %v; want %v", queue.IDs(listed), err, []int64{first, fresh, plain[0]})
	}

	// Rolled back, the unique job was never stored: its key is free.
	tx2, err := d.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	gone, existed, err := q.EnqueueUnique(ctx, tx2, queue.NewJob{Queue: "u", DedupeKey: "rolled-back"})
	if err != nil || existed {
		t.Fatalf("EnqueueUnique(tx2) = %d, %v, %v", gone, existed, err)
	}
	if err := tx2.Rollback(); err != nil {
		t.Fatal(err)
	}
	id, existed, err = q.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "u", DedupeKey: "rolled-back"})
	if err != nil || existed || id == gone {
		t.Fatalf("EnqueueUnique after rollback = %d, %v, %v; want a new job", id, existed, err)
	}
}

// EnqueueUnique tells a new job from an existing one on a *sql.DB of the
// user's whatever its DSN: server-side prepared statements (no
// interpolateParams), and clientFoundRows, which makes the affected-row
// count of a collision 1, like an insert's.
func TestEnqueueUniqueAnyDSN(t *testing.T) {
	t.Parallel()
	for _, params := range []string{"", "clientFoundRows=true", "clientFoundRows=true&interpolateParams=true"} {
		t.Run("params="+params, func(t *testing.T) {
			t.Parallel()
			_, dsn := newDatabase(t)
			if params != "" {
				sep := "?"
				if strings.Contains(dsn, "?") {
					sep = "&"
				}
				dsn += sep + params
			}
			db, err := sql.Open("mysql", dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			ctx := context.Background()
			if err := Migrate(ctx, db, Config{}); err != nil {
				t.Fatal(err)
			}
			q, err := New(db, Config{Config: queue.Config{Logger: quiet}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { q.Close() })
			enqueueN(t, q, "u", 3, "x") // so that ids and counts differ
			id, existed, err := q.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "u", DedupeKey: "k"})
			if err != nil || existed || id <= 3 {
				t.Fatalf("first EnqueueUnique = %d, %v, %v; want a new id, false, nil", id, existed, err)
			}
			for range 2 {
				again, existed, err := q.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "u", DedupeKey: "k"})
				if err != nil || !existed || again != id {
					t.Fatalf("EnqueueUnique again = %d, %v, %v; want %d, true, nil", again, existed, err, id)
				}
			}
			other, existed, err := q.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "u", DedupeKey: "k2"})
			if err != nil || existed || other <= id {
				t.Fatalf("EnqueueUnique(k2) = %d, %v, %v; want a new id, false, nil", other, existed, err)
			}
			if s := queueStats(t, q, "u"); s.Ready != 5 {
				t.Fatalf("%d jobs stored, want 5", s.Ready)
			}
		})
	}
}

// EnqueueUnique's collision handling is for the dedupe key only: a value
// the column cannot hold is an error, not a warning and a cut value (as
// INSERT IGNORE would make it), and nothing is stored. The Driver is
// called directly: Queue refuses such a key itself.
func TestEnqueueUniqueKeepsOtherErrors(t *testing.T) {
	t.Parallel()
	q, d := openQueue(t, Config{}, true)
	ctx := context.Background()
	long := strings.Repeat("k", 201) // dedupe_key is VARBINARY(200)
	id, existed, err := d.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "u", DedupeKey: long, MaxAttempts: 3})
	if err == nil {
		t.Fatalf("EnqueueUnique of a 201-byte key = %d, %v, nil; want an error", id, existed)
	}
	if all, err := q.Jobs(ctx, queue.JobFilter{}); err != nil || len(all) != 0 {
		t.Fatalf("jobs stored: %d, %v; want none", len(all), err)
	}
	if _, _, err := d.EnqueueUnique(ctx, "not a tx", queue.NewJob{Queue: "u", DedupeKey: "k"}); !errors.Is(err, queue.ErrUnsupportedTx) {
		t.Fatalf("EnqueueUnique with a string for tx: %v, want ErrUnsupportedTx", err)
	}
	if _, _, err := d.EnqueueUnique(ctx, (*sql.Tx)(nil), queue.NewJob{Queue: "u", DedupeKey: "k"}); !errors.Is(err, queue.ErrUnsupportedTx) {
		t.Fatalf("EnqueueUnique with a nil *sql.Tx: %v, want ErrUnsupportedTx", err)
	}
}

// Jobs refuses a bad filter before any statement runs, whoever calls it,
// and passes every value as a parameter: a queue name that looks like SQL
// is just a name.
func TestJobsFilters(t *testing.T) {
	t.Parallel()
	q, d := openQueue(t, Config{}, true)
	ctx := context.Background()
	for _, c := range []struct {
		f    queue.JobFilter
		want error
	}{
		{queue.JobFilter{State: "bogus"}, queue.ErrInvalidJob},
		{queue.JobFilter{State: "ready' OR '1'='1"}, queue.ErrInvalidJob},
		{queue.JobFilter{Queue: "a'b"}, queue.ErrInvalidQueue},
		{queue.JobFilter{Limit: -1}, queue.ErrInvalidLimit},
		{queue.JobFilter{Limit: queue.MaxListLimit + 1}, queue.ErrInvalidLimit},
	} {
		if _, err := d.Jobs(ctx, c.f); !errors.Is(err, c.want) {
			t.Errorf("Driver.Jobs(%+v): %v, want %v", c.f, err, c.want)
		}
		if _, err := q.Jobs(ctx, c.f); !errors.Is(err, c.want) {
			t.Errorf("Queue.Jobs(%+v): %v, want %v", c.f, err, c.want)
		}
	}

	// Dead jobs whose claim order (priority) is the reverse of their id
	// order: the (queue, dead) listing goes through the claim index and
	// must still come back in id order.
	var jobs []queue.NewJob
	for i := range 6 {
		jobs = append(jobs, queue.NewJob{Queue: "--", Priority: int16(10 - i), Payload: []byte{byte('a' + i)}, DedupeKey: "key" + string(rune('a'+i))})
	}
	ids, err := q.Enqueue(ctx, jobs...)
	if err != nil {
		t.Fatal(err)
	}
	enqueueN(t, q, "select", 3, "s")
	c := newClaimer(t, q)
	held, err := c.Claim(ctx, "--", 6)
	if err != nil || len(held) != 6 {
		t.Fatal(len(held), err)
	}
	var kill []queue.RetryParams
	for _, j := range held[:4] {
		kill = append(kill, queue.RetryParams{Lease: j.Lease(), Error: "boom " + string(j.Payload), Dead: true})
	}
	if err := c.Retry(ctx, kill); err != nil {
		t.Fatal(err)
	}
	dead, err := q.Jobs(ctx, queue.JobFilter{Queue: "--", State: queue.StateDead})
	if err != nil {
		t.Fatal(err)
	}
	wantDead := slices.Sorted(slices.Values(queue.IDs(held[:4])))
	if !slices.Equal(queue.IDs(dead), wantDead) {
		t.Fatalf("dead jobs %v, want %v in id order", queue.IDs(dead), wantDead)
	}
	for _, j := range dead {
		i := slices.Index(ids, j.ID)
		if j.State != queue.StateDead || j.Attempt != 1 || j.LastError != "boom "+string(rune('a'+i)) ||
			j.DedupeKey != "key"+string(rune('a'+i)) || j.Token != 0 || !j.ClaimedUntil.IsZero() ||
			j.Priority != int16(10-i) || j.RunAt.IsZero() || j.CreatedAt.IsZero() {
			t.Errorf("dead job listed as %+v", j)
		}
	}
	claimed, err := q.Jobs(ctx, queue.JobFilter{Queue: "--", State: queue.StateClaimed})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claimed jobs: %d, %v; want 2", len(claimed), err)
	}
	for _, j := range claimed {
		if j.Token == 0 || j.ClaimedUntil.IsZero() || j.State != queue.StateClaimed {
			t.Errorf("claimed job listed without its lease: %+v", j)
		}
	}
	if sel, err := q.Jobs(ctx, queue.JobFilter{Queue: "select", State: queue.StateReady, Limit: 2}); err != nil || len(sel) != 2 {
		t.Fatalf("ready jobs of queue select: %d, %v; want 2 (the limit)", len(sel), err)
	}
	if err := c.Complete(ctx, leases(held[4:])); err != nil {
		t.Fatal(err)
	}
}

// One Retry call can snooze, retry and kill jobs side by side: each row
// gets its own mode, delay and error.
func TestRetryMixesSnooze(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t, Config{}, true)
	ctx := context.Background()
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "m", MaxAttempts: 5}, queue.NewJob{Queue: "m", MaxAttempts: 5},
		queue.NewJob{Queue: "m", MaxAttempts: 5}, queue.NewJob{Queue: "m", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	c := newClaimer(t, q)
	jobs, err := c.Claim(ctx, "m", 4)
	if err != nil || len(jobs) != 4 {
		t.Fatal(len(jobs), err)
	}
	// A first failure gives every job a last_error to keep.
	var first []queue.RetryParams
	for _, j := range jobs[:3] {
		first = append(first, queue.RetryParams{Lease: j.Lease(), Error: "first"})
	}
	if err := c.Retry(ctx, first); err != nil {
		t.Fatal(err)
	}
	again, err := c.Claim(ctx, "m", 3)
	if err != nil || len(again) != 3 {
		t.Fatal(len(again), err)
	}
	err = c.Retry(ctx, []queue.RetryParams{
		{Lease: again[0].Lease(), Delay: time.Hour, Error: "ignored", Dead: true, Snooze: true},
		{Lease: again[1].Lease(), Delay: time.Hour, Error: "second"},
		{Lease: again[2].Lease(), Error: "fatal", Dead: true},
		// Out of attempts, yet a snooze spends none: ready again.
		{Lease: jobs[3].Lease(), Delay: time.Hour, Error: "ignored", Snooze: true},
	})
	if err != nil {
		t.Fatalf("Retry: %v", err)
	}
	all, err := q.Jobs(ctx, queue.JobFilter{Queue: "m"})
	if err != nil || len(all) != 4 {
		t.Fatal(len(all), err)
	}
	byID := map[int64]*queue.Job{}
	for _, j := range all {
		byID[j.ID] = j
	}
	for _, w := range []struct {
		id        int64
		state     queue.State
		attempt   int
		lastError string
		later     bool
	}{
		{again[0].ID, queue.StateReady, 1, "first", true},
		{again[1].ID, queue.StateReady, 2, "second", true},
		{again[2].ID, queue.StateDead, 2, "fatal", false},
		{jobs[3].ID, queue.StateReady, 0, "", true},
	} {
		j := byID[w.id]
		if j.State != w.state || j.Attempt != w.attempt || j.LastError != w.lastError || j.Token != 0 {
			t.Errorf("job %d: state %s, attempt %d, last_error %q, token %d; want %s, %d, %q, 0",
				w.id, j.State, j.Attempt, j.LastError, j.Token, w.state, w.attempt, w.lastError)
		}
		if w.later && time.Until(j.RunAt) < 30*time.Minute {
			t.Errorf("job %d runs at %v, want about an hour from now", w.id, j.RunAt)
		}
	}
	if s := queueStats(t, q, "m"); s.Scheduled != 3 || s.Dead != 1 || s.Ready != 0 || s.Held != 0 {
		t.Fatalf("stats %+v, want 3 scheduled and 1 dead", s)
	}
}

// A paused queue's claim finds no candidates, so it opens no transaction
// and counts no empty lock; and the locking step checks the pause again on
// its own (step 1 may have read a replica, or run before the pause) without
// locking the queues row, which all claimers of the queue read.
func TestPauseInClaimSteps(t *testing.T) {
	t.Parallel()
	q, d := openQueue(t, Config{}, true)
	ctx := context.Background()
	ids := enqueueN(t, q, "p", 10, "j")
	if err := q.Pause(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	a := newClaimer(t, q)
	if got, err := a.Claim(ctx, "p", 5); err != nil || len(got) != 0 {
		t.Fatalf("claim of a paused queue: %d jobs, %v", len(got), err)
	}
	if empty, claims := a.EmptyLocks(); empty != 0 || claims != 0 {
		t.Fatalf("a paused queue's claim counted %d empty locks of %d claims; want no attempt at all", empty, claims)
	}

	lockStep := func() []*queue.Job {
		t.Helper()
		tx, err := beginRC(ctx, a.conn)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		jobs, err := a.lock(ctx, tx, ids[:5], "p", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) > 0 {
			// The claim holds its job rows only: another session can lock
			// the queues row at once.
			if hasInnoDBLocks(t) { // InnoDB-only check: TiDB has no INNODB_TRX
				if n, err := rowsLocked(ctx, a.connID, 0); err != nil || n != int64(len(jobs)) {
					t.Errorf("trx_rows_locked %d (%v), want %d", n, err, len(jobs))
				}
			}
			other, err := d.DB().BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Rollback()
			var name string
			if err := other.QueryRowContext(ctx, "SELECT queue FROM "+d.stmts.queuesTable+
				" WHERE queue = 'p' FOR UPDATE NOWAIT").Scan(&name); err != nil {
				t.Errorf("the queues row is locked while a claim holds its jobs: %v", err)
			}
		}
		return jobs
	}
	// Step 1 is bypassed: the candidates are handed to step 2 directly.
	if got := lockStep(); len(got) != 0 {
		t.Fatalf("the locking step took %d jobs of a paused queue", len(got))
	}
	if err := q.Resume(ctx, "p"); err != nil { // the queues row stays, paused = false
		t.Fatal(err)
	}
	if got := lockStep(); len(got) != 5 {
		t.Fatalf("the locking step took %d jobs of the resumed queue, want 5", len(got))
	}
	if got, err := a.Claim(ctx, "p", 10); err != nil || len(got) != 10 {
		t.Fatalf("claim of the resumed queue: %d jobs, %v", len(got), err)
	}
}

// Cancel takes ids in any number, repeated or unknown, and deletes only
// unheld jobs; RetryDead revives more dead jobs than one batch holds, and
// only the queue's.
func TestCancelAndRetryDeadBatches(t *testing.T) {
	t.Parallel()
	q, d := openQueue(t, Config{}, true)
	ctx := context.Background()
	const n = retryDeadBatch + 7
	ids := enqueueN(t, q, "d", n, "j")
	other := enqueueN(t, q, "other", 2, "o")
	// Kill them all without claiming: what a long outage leaves behind.
	if _, err := d.DB().ExecContext(ctx, "UPDATE "+d.stmts.jobsTable+" SET state = 'dead', attempt = 3, last_error = 'outage'"); err != nil {
		t.Fatal(err)
	}
	got, err := q.RetryDead(ctx, "d")
	if err != nil || !slices.Equal(got, ids) {
		t.Fatalf("RetryDead revived %d jobs, %v; want the %d of queue d", len(got), err, n)
	}
	if s := queueStats(t, q, "d"); s.Ready != n || s.Dead != 0 {
		t.Fatalf("stats %+v, want %d ready", s, n)
	}
	if s := queueStats(t, q, "other"); s.Dead != 2 {
		t.Fatalf("other queue: %+v, want its 2 jobs still dead", s)
	}
	if again, err := q.RetryDead(ctx, "d"); err != nil || len(again) != 0 {
		t.Fatalf("second RetryDead: %v, %v; want nothing", again, err)
	}
	revived, err := q.Jobs(ctx, queue.JobFilter{Queue: "d", Limit: 1})
	if err != nil || len(revived) != 1 || revived[0].Attempt != 0 || revived[0].LastError != "outage" {
		t.Fatalf("revived job: %+v, %v; want attempt 0 and last_error kept", revived, err)
	}

	c := newClaimer(t, q)
	held, err := c.Claim(ctx, "d", 3)
	if err != nil || len(held) != 3 {
		t.Fatal(len(held), err)
	}
	// Every id twice, the other queue's dead jobs, and ids no job has.
	ask := slices.Concat(ids, ids, other, []int64{1 << 40, 0, -1})
	gone, err := q.Cancel(ctx, ask...)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Concat(slices.DeleteFunc(slices.Clone(ids), func(id int64) bool {
		return slices.Contains(queue.IDs(held), id)
	}), other)
	slices.Sort(want)
	if !slices.Equal(gone, want) {
		t.Fatalf("Cancel deleted %d ids, want the %d unheld ones in order", len(gone), len(want))
	}
	if s := queueStats(t, q, "d"); s.Held != 3 || s.Ready != 0 {
		t.Fatalf("after Cancel: %+v, want the 3 held jobs only", s)
	}
	if err := c.Complete(ctx, leases(held)); err != nil {
		t.Fatalf("Complete of the held jobs after Cancel: %v", err)
	}
}

// holdRescueLock takes d's rescue lock on a session of another pool, as a
// rescue in another process would, and returns the function that gives it
// back.
func holdRescueLock(t *testing.T, d *Driver) (release func()) {
	t.Helper()
	ctx := context.Background()
	cn, err := admin(t).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got int
	if err := cn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", d.rescueLock).Scan(&got); err != nil || got != 1 {
		cn.Close()
		t.Fatalf("GET_LOCK(%q) = %d, %v", d.rescueLock, got, err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			var ok int
			if err := cn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", d.rescueLock).Scan(&ok); err != nil || ok != 1 {
				t.Errorf("RELEASE_LOCK = %d, %v", ok, err)
			}
			cn.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// rescueLockFree reports whether no session holds d's rescue lock.
func rescueLockFree(t *testing.T, d *Driver) bool {
	t.Helper()
	var free int
	if err := admin(t).QueryRow("SELECT IS_FREE_LOCK(?)", d.rescueLock).Scan(&free); err != nil {
		t.Fatal(err)
	}
	return free == 1
}

// expire claims n jobs of queue name with a claimer that then dies, and
// waits until their leases have ended on the database clock.
func expire(t *testing.T, q *queue.Queue, d *Driver, name string, n int) {
	t.Helper()
	ctx := context.Background()
	enqueueN(t, q, name, n, "e")
	dying := newClaimer(t, q)
	if got, err := dying.Claim(ctx, name, n); err != nil || len(got) != n {
		t.Fatal(len(got), err)
	}
	killConn(t, dying.connID)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var left int
		err := d.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM "+d.stmts.jobsTable+
			" WHERE queue = ? AND state = 'claimed' AND claimed_until >= UTC_TIMESTAMP(6)", name).Scan(&left)
		if err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d leases never expired", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// While another session — another process — holds the table's rescue
// lock, neither Rescue nor the pass a Claim runs gives back expired
// leases; once it lets go, they do, and release the lock afterwards.
func TestRescueLockedElsewhereIsSkipped(t *testing.T) {
	t.Parallel()
	const lease = 300 * time.Millisecond
	q, d := openQueue(t, Config{Config: queue.Config{Lease: lease}}, true)
	ctx := context.Background()
	expire(t, q, d, "r", 4)
	release := holdRescueLock(t, d)

	n, err := d.Rescue(ctx)
	if !errors.Is(err, ErrRescueBusy) || n != 0 {
		t.Fatalf("Rescue while another session holds the lock = %d, %v; want 0, ErrRescueBusy", n, err)
	}
	c := newClaimer(t, q)
	for range 3 {
		time.Sleep(lease / 4) // a pass is due on every claim
		if got, err := c.Claim(ctx, "r", 10); err != nil || len(got) != 0 {
			t.Fatalf("claim while the rescue lock is held elsewhere: %d jobs, %v; want none", len(got), err)
		}
	}
	wantReadyHeld(t, q, "r", 0, 4)

	release()
	n, err = d.Rescue(ctx)
	if err != nil || n != 4 {
		t.Fatalf("Rescue after the lock was released = %d, %v; want 4, nil", n, err)
	}
	if !rescueLockFree(t, d) {
		t.Fatal("Rescue kept the rescue lock")
	}
	wantReadyHeld(t, q, "r", 4, 0)

	// The pass inside Claim takes and releases the lock too.
	expire(t, q, d, "r2", 2)
	time.Sleep(lease / 4)
	got, err := c.Claim(ctx, "r2", 10)
	for deadline := time.Now().Add(10 * time.Second); err == nil && len(got) == 0 && time.Now().Before(deadline); {
		time.Sleep(lease / 4)
		got, err = c.Claim(ctx, "r2", 10)
	}
	if err != nil || len(got) != 2 {
		t.Fatalf("claim after the lock was released: %d jobs, %v; want the 2 rescued", len(got), err)
	}
	if !rescueLockFree(t, d) {
		t.Fatal("the claim's rescue pass kept the rescue lock")
	}
}

// Two rescues of one table at the same time: the second, whether Rescue
// or a claim's pass, finds the first holding the lock and skips; the
// first does all the work. Another table's rescue is not held up.
func TestConcurrentRescuesDoNotOverlap(t *testing.T) {
	t.Parallel()
	const lease = 300 * time.Millisecond
	q, d := openQueue(t, Config{Config: queue.Config{Lease: lease}}, true)
	q2, d2 := openQueue(t, Config{Config: queue.Config{Lease: lease}}, true)
	ctx := context.Background()
	expire(t, q, d, "r", 5)
	expire(t, q2, d2, "r", 1)
	if d.rescueLock == d2.rescueLock {
		t.Fatalf("two databases' tables share the rescue lock %q", d.rescueLock)
	}

	entered, resume := make(chan struct{}), make(chan struct{})
	var inside, passes atomic.Int32
	d.inRescue = func() {
		if inside.Add(1) > 1 {
			t.Error("two rescues of one table ran at once")
		}
		if passes.Add(1) == 1 {
			close(entered)
			<-resume
		}
		inside.Add(-1)
	}
	type result struct {
		n   int
		err error
	}
	first := make(chan result, 1)
	go func() {
		n, err := d.Rescue(ctx)
		first <- result{n, err}
	}()
	<-entered
	// The first Rescue holds the lock and waits inside it.
	n, err := d.Rescue(ctx)
	if !errors.Is(err, ErrRescueBusy) || n != 0 {
		t.Errorf("concurrent Rescue = %d, %v; want 0, ErrRescueBusy", n, err)
	}
	c := newClaimer(t, q)
	time.Sleep(lease / 4)
	if got, err := c.Claim(ctx, "r", 10); err != nil || len(got) != 0 {
		t.Errorf("claim during the rescue: %d jobs, %v; want none (its pass skipped)", len(got), err)
	}
	if n, err := d2.Rescue(ctx); err != nil || n != 1 {
		t.Errorf("another table's Rescue = %d, %v; want 1, nil", n, err)
	}
	wantReadyHeld(t, q, "r", 0, 5)
	close(resume)
	r := <-first
	if r.err != nil || r.n != 5 {
		t.Fatalf("first Rescue = %d, %v; want 5, nil", r.n, r.err)
	}
	if p := passes.Load(); p != 1 {
		t.Fatalf("%d rescue passes ran under the lock, want 1 (the others were skipped)", p)
	}
	wantReadyHeld(t, q, "r", 5, 0)
	if !rescueLockFree(t, d) {
		t.Fatal("the rescue lock is still held")
	}
}
