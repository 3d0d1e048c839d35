package sqlite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

func ctxT(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newQ(t testing.TB, cfg queue.Config) *queue.Queue {
	t.Helper()
	return newTestQueue(t, filepath.Join(t.TempDir(), "dbq.db"), cfg, true)
}

func newClaimer(t testing.TB, q *queue.Queue) *Claimer {
	t.Helper()
	c, err := q.NewClaimer(ctxT(t))
	if err != nil {
		t.Fatalf("NewClaimer: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c.(*Claimer)
}

func enqueue(t testing.TB, q *queue.Queue, jobs ...queue.NewJob) []int64 {
	t.Helper()
	ids, err := q.Enqueue(ctxT(t), jobs...)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if len(ids) != len(jobs) {
		t.Fatalf("Enqueue: %d ids for %d jobs", len(ids), len(jobs))
	}
	return ids
}

func claim(t testing.TB, c queue.Claimer, name string, n int) []*queue.Job {
	t.Helper()
	jobs, err := c.Claim(ctxT(t), name, n)
	if err != nil {
		t.Fatalf("Claim(%q, %d): %v", name, n, err)
	}
	return jobs
}

func statsOf(t testing.TB, q *queue.Queue, name string) queue.QueueStats {
	t.Helper()
	all, err := q.Stats(ctxT(t))
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

func wantCounts(t testing.TB, q *queue.Queue, name string, ready, scheduled, held, dead int64) {
	t.Helper()
	s := statsOf(t, q, name)
	if s.Ready != ready || s.Scheduled != scheduled || s.Held != held || s.Dead != dead {
		t.Fatalf("%s: ready/scheduled/held/dead = %d/%d/%d/%d, want %d/%d/%d/%d",
			name, s.Ready, s.Scheduled, s.Held, s.Dead, ready, scheduled, held, dead)
	}
}

func TestClaimOrderAndRunAt(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{})
	c := newClaimer(t, q)
	past := time.Now().Add(-time.Hour)
	ids := enqueue(t, q,
		queue.NewJob{Queue: "q", Payload: []byte("p5")},                                       // 0: priority 0, now
		queue.NewJob{Queue: "q", Payload: []byte("p1"), Priority: -1},                         // 1: first
		queue.NewJob{Queue: "q", Payload: []byte("p3"), RunAt: past},                          // 2: priority 0, an hour ago
		queue.NewJob{Queue: "q", Payload: []byte("later"), Delay: time.Hour},                  // 3: not yet
		queue.NewJob{Queue: "q", Payload: []byte("future"), RunAt: time.Now().Add(time.Hour)}, // 4: not yet
		queue.NewJob{Queue: "q", Payload: []byte("p9"), Priority: 3},                          // 5: last
		queue.NewJob{Queue: "other", Payload: []byte("x")},                                    // 6: other queue
	)
	if !slices.IsSorted(ids) {
		t.Fatalf("ids %v not in input order", ids)
	}
	wantCounts(t, q, "q", 4, 2, 0, 0)

	jobs := claim(t, c, "q", 10)
	want := []int64{ids[1], ids[2], ids[0], ids[5]}
	if got := jobIDs(jobs); !slices.Equal(got, want) {
		t.Fatalf("claimed %v, want %v", got, want)
	}
	for _, j := range jobs {
		if j.State != queue.StateClaimed || j.Token == 0 || j.Queue != "q" || j.MaxAttempts != queue.DefaultMaxAttempts {
			t.Fatalf("job %+v: bad fields", j)
		}
		if d := time.Until(j.ClaimedUntil); d < queue.DefaultLease-time.Minute || d > queue.DefaultLease+time.Minute {
			t.Fatalf("ClaimedUntil %v is not about a lease from now", j.ClaimedUntil)
		}
	}
	if got := jobs[1].RunAt; !got.Equal(past.Truncate(time.Microsecond)) {
		t.Fatalf("RunAt %v, want %v", got, past)
	}
	if more := claim(t, c, "q", 10); len(more) != 0 {
		t.Fatalf("claimed scheduled jobs %v", jobIDs(more))
	}
	wantCounts(t, q, "q", 0, 2, 4, 0)
	if got := claim(t, c, "q", 1); len(got) != 0 {
		t.Fatal("claimed a held job")
	}
	if got := jobIDs(claim(t, c, "other", 5)); !slices.Equal(got, ids[6:7]) {
		t.Fatalf("other: %v", got)
	}
}

func TestClaimLimit(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{})
	c := newClaimer(t, q)
	var jobs []queue.NewJob
	for i := range 25 {
		jobs = append(jobs, queue.NewJob{Queue: "q", Payload: fmt.Appendf(nil, "%d", i)})
	}
	ids := enqueue(t, q, jobs...)
	var got []int64
	for _, n := range []int{1, 10, 10, 10} {
		batch := claim(t, c, "q", n)
		if len(batch) > n {
			t.Fatalf("Claim(%d) gave %d", n, len(batch))
		}
		got = append(got, jobIDs(batch)...)
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("claimed %v, want %v", got, ids)
	}
}

// TestExactlyOnce drains jobs with many claimers on two Queues over one
// file (two "processes": two pools, two write gates, meeting at SQLite's
// file lock) while producers still enqueue, and checks each job is claimed
// exactly once.
func TestExactlyOnce(t *testing.T) {
	t.Parallel()
	const (
		claimers  = 8
		jobsTotal = 5000
		producers = 4
	)
	path := filepath.Join(t.TempDir(), "dbq.db")
	q1 := newTestQueue(t, path, queue.Config{}, true)
	q2 := newTestQueue(t, path, queue.Config{}, false)
	ctx := ctxT(t)

	var (
		mu     sync.Mutex
		ledger = map[int64]int{}
		wg     sync.WaitGroup
	)
	for p := range producers {
		wg.Go(func() {
			for i := 0; i < jobsTotal/producers; i += 50 {
				batch := make([]queue.NewJob, 50)
				for k := range batch {
					batch[k] = queue.NewJob{Queue: "q", Payload: fmt.Appendf(nil, "%d-%d", p, i+k)}
				}
				if _, err := q1.Enqueue(ctx, batch...); err != nil {
					t.Errorf("Enqueue: %v", err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	var cwg sync.WaitGroup
	for i := range claimers {
		q := q1
		if i%2 == 1 {
			q = q2
		}
		c := newClaimer(t, q)
		cwg.Go(func() {
			for {
				jobs, err := c.Claim(ctx, "q", 20)
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				if len(jobs) == 0 {
					select {
					case <-done:
						return
					default:
						time.Sleep(time.Millisecond)
						continue
					}
				}
				mu.Lock()
				for _, j := range jobs {
					ledger[j.ID]++
				}
				mu.Unlock()
				if err := c.Complete(ctx, leasesOf(jobs)); err != nil {
					t.Errorf("Complete: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	cwg.Wait()
	if len(ledger) != jobsTotal {
		t.Fatalf("claimed %d distinct jobs, want %d", len(ledger), jobsTotal)
	}
	for id, n := range ledger {
		if n != 1 {
			t.Fatalf("job %d claimed %d times", id, n)
		}
	}
	wantCounts(t, q1, "q", 0, 0, 0, 0)
}

func TestLeaseExpiryGivesJobsBack(t *testing.T) {
	t.Parallel()
	const lease = time.Second // long enough that the extended lease outlives the checks under -race
	q := newQ(t, queue.Config{Lease: lease})
	dead, live := newClaimer(t, q), newClaimer(t, q)
	ids := enqueue(t, q, queue.NewJob{Queue: "q"}, queue.NewJob{Queue: "q"}, queue.NewJob{Queue: "q"})
	if got := dead.LeaseDuration(); got != lease {
		t.Fatalf("LeaseDuration %v", got)
	}
	old := claim(t, dead, "q", 2)
	if len(old) != 2 {
		t.Fatalf("claimed %d", len(old))
	}
	mine := claim(t, live, "q", 5)
	if len(mine) != 1 || mine[0].ID != ids[2] {
		t.Fatalf("live claimed %v, want only %d", jobIDs(mine), ids[2])
	}
	time.Sleep(lease / 2)
	if err := live.Extend(ctxT(t), leasesOf(mine)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(lease/2 + 50*time.Millisecond)
	wantCounts(t, q, "q", 2, 0, 1, 0) // the expired leases count as ready
	back := claim(t, live, "q", 5)
	if !slices.Equal(jobIDs(back), ids[:2]) {
		t.Fatalf("after expiry claimed %v, want %v", jobIDs(back), ids[:2])
	}
	for i, j := range back {
		if j.Token == old[i].Token || j.Attempt != 1 {
			t.Fatalf("reclaimed job %+v", j)
		}
	}
	for name, op := range map[string]func() error{
		"Complete": func() error { return dead.Complete(ctxT(t), leasesOf(old)) },
		"Release":  func() error { return dead.Release(ctxT(t), leasesOf(old)) },
		"Extend":   func() error { return dead.Extend(ctxT(t), leasesOf(old)) },
		"Retry": func() error {
			return dead.Retry(ctxT(t), []queue.RetryParams{{Lease: old[0].Lease()}, {Lease: old[1].Lease()}})
		},
	} {
		err := op()
		var lost *queue.LeaseLostError
		if !errors.Is(err, queue.ErrLeaseLost) || !errors.As(err, &lost) || !slices.Equal(lost.IDs, ids[:2]) {
			t.Fatalf("%s with old tokens: %v", name, err)
		}
	}
	wantCounts(t, q, "q", 0, 0, 3, 0)
	// A batch mixing a forged lease with live ones: the live ones take effect.
	forged := queue.Lease{ID: mine[0].ID, Token: mine[0].Token + 1}
	err := live.Complete(ctxT(t), []queue.Lease{back[0].Lease(), forged, back[1].Lease()})
	var lost *queue.LeaseLostError
	if !errors.As(err, &lost) || !slices.Equal(lost.IDs, []int64{forged.ID}) {
		t.Fatalf("mixed Complete: %v", err)
	}
	wantCounts(t, q, "q", 0, 0, 1, 0)
}

func TestRescue(t *testing.T) {
	t.Parallel()
	const lease = 100 * time.Millisecond
	q := newQ(t, queue.Config{Lease: lease})
	c := newClaimer(t, q)
	enqueue(t, q, queue.NewJob{Queue: "q"}, queue.NewJob{Queue: "q"})
	claim(t, c, "q", 2)
	d := driverOf(t, q)
	if n, err := d.Rescue(ctxT(t)); err != nil || n != 0 {
		t.Fatalf("Rescue before expiry: %d, %v", n, err)
	}
	time.Sleep(lease + 20*time.Millisecond)
	if n, err := d.Rescue(ctxT(t)); err != nil || n != 2 {
		t.Fatalf("Rescue after expiry: %d, %v", n, err)
	}
	wantCounts(t, q, "q", 2, 0, 0, 0)
}

func TestRetryToDead(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{})
	c := newClaimer(t, q)
	ids := enqueue(t, q,
		queue.NewJob{Queue: "q", MaxAttempts: 3},
		queue.NewJob{Queue: "d", MaxAttempts: 10},
		queue.NewJob{Queue: "b"},
	)
	for attempt := range 3 {
		jobs := claim(t, c, "q", 1)
		if len(jobs) != 1 || jobs[0].ID != ids[0] || jobs[0].Attempt != attempt {
			t.Fatalf("attempt %d: claimed %+v", attempt, jobs)
		}
		if attempt > 0 && jobs[0].LastError != fmt.Sprint("boom ", attempt-1) {
			t.Fatalf("LastError %q", jobs[0].LastError)
		}
		err := c.Retry(ctxT(t), []queue.RetryParams{{Lease: jobs[0].Lease(), Error: fmt.Sprint("boom ", attempt)}})
		if err != nil {
			t.Fatalf("Retry: %v", err)
		}
	}
	wantCounts(t, q, "q", 0, 0, 0, 1)
	if got := claim(t, c, "q", 1); len(got) != 0 {
		t.Fatal("claimed a dead job")
	}

	// Dead ends a job at once; a long error is cut.
	jobs := claim(t, c, "d", 1)
	long := strings.Repeat("é", queue.MaxErrorBytes) // 2 bytes a rune
	if err := c.Retry(ctxT(t), []queue.RetryParams{{Lease: jobs[0].Lease(), Error: long, Dead: true}}); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, q, "d", 0, 0, 0, 1)
	var lastErr string
	var attempt int
	if err := driverOf(t, q).DB().QueryRow(`SELECT last_error, attempt FROM dbq_jobs WHERE id = ?`, ids[1]).Scan(&lastErr, &attempt); err != nil {
		t.Fatal(err)
	}
	if len(lastErr) > queue.MaxErrorBytes || !strings.HasPrefix(long, lastErr) || len(lastErr) < queue.MaxErrorBytes-4 || attempt != 1 {
		t.Fatalf("last_error %d bytes, attempt %d", len(lastErr), attempt)
	}

	// A Delay is honoured on the database clock.
	jobs = claim(t, c, "b", 1)
	if err := c.Retry(ctxT(t), []queue.RetryParams{{Lease: jobs[0].Lease(), Delay: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, q, "b", 0, 1, 0, 0)
	if err := c.Retry(ctxT(t), []queue.RetryParams{{Lease: jobs[0].Lease(), Delay: -time.Second}}); !errors.Is(err, queue.ErrInvalidJob) {
		t.Fatalf("negative Delay: %v", err)
	}
}

func TestReleaseSpendsNoAttempt(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{})
	c := newClaimer(t, q)
	runAt := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	ids := enqueue(t, q, queue.NewJob{Queue: "q", MaxAttempts: 1, RunAt: runAt})
	for range 5 {
		jobs := claim(t, c, "q", 1)
		if len(jobs) != 1 || jobs[0].ID != ids[0] || jobs[0].Attempt != 0 || !jobs[0].RunAt.Equal(runAt) {
			t.Fatalf("claimed %+v", jobs)
		}
		if err := c.Release(ctxT(t), leasesOf(jobs)); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, q, "q", 1, 0, 0, 0)
	}
}

// TestExtendKeepsJobFromRescue: a job whose lease its holder keeps
// extending is neither claimed by another claimer nor rescued, over three
// times its lease. Another claimer may take it only once more than a lease
// has passed since an Extend began; a step that took that long (a machine
// stalled under load) proves nothing either way, and the scenario starts
// again with a fresh job, up to three times.
func TestExtendKeepsJobFromRescue(t *testing.T) {
	t.Parallel()
	const lease = 500 * time.Millisecond
	q := newQ(t, queue.Config{Lease: lease})
	holder, other := newClaimer(t, q), newClaimer(t, q)
	for attempt := 1; ; attempt++ {
		stalled := extendAndWatch(t, q, holder, other, lease)
		if stalled == 0 {
			return
		}
		if attempt == 3 {
			t.Fatalf("three runs in a row had a step of more than the lease (the last: %v): the machine is too slow for this test's %v lease", stalled, lease)
		}
		t.Logf("run %d: a step took %v, more than the lease: started again", attempt, stalled)
	}
}

// extendAndWatch enqueues a job, claims it with holder and extends it
// every third of lease for three leases, checking after each Extend that
// other cannot claim it and Rescue does not take it; then checks the lease
// moved on and completes the job. It returns 0, or how long a step took
// when more than lease passed between the start of an Extend and the end
// of the checks after it (the job may then be another's by right, and the
// run is left off, the job completed or gone).
func extendAndWatch(t *testing.T, q *queue.Queue, holder, other queue.Claimer, lease time.Duration) time.Duration {
	t.Helper()
	enqueue(t, q, queue.NewJob{Queue: "q"})
	jobs := claim(t, holder, "q", 1)
	first := jobs[0].ClaimedUntil
	deadline := time.Now().Add(3 * lease)
	for time.Now().Before(deadline) {
		time.Sleep(lease / 3)
		start := time.Now()
		if err := holder.Extend(ctxT(t), leasesOf(jobs)); err != nil {
			if took := time.Since(start); took > lease && errors.Is(err, queue.ErrLeaseLost) {
				return took
			}
			t.Fatalf("Extend: %v", err)
		}
		got := claim(t, other, "q", 1)
		n, err := driverOf(t, q).Rescue(ctxT(t))
		took := time.Since(start)
		if len(got) != 0 || err != nil || n != 0 {
			if took > lease && err == nil {
				if len(got) != 0 {
					if err := other.Complete(ctxT(t), leasesOf(got)); err != nil {
						t.Fatal(err)
					}
				}
				return took
			}
			t.Fatalf("%v after an Extend: another claimer took %d jobs, Rescue %d (%v)", took, len(got), n, err)
		}
	}
	var until int64
	if err := driverOf(t, q).DB().QueryRow(`SELECT claimed_until FROM dbq_jobs WHERE id = ?`, jobs[0].ID).Scan(&until); err != nil {
		t.Fatal(err)
	}
	if !fromMicros(until).After(first) {
		t.Fatalf("claimed_until %v not after %v", fromMicros(until), first)
	}
	if err := holder.Complete(ctxT(t), leasesOf(jobs)); err != nil {
		t.Fatalf("Complete after Extend: %v", err)
	}
	return 0
}

func TestNotMigrated(t *testing.T) {
	t.Parallel()
	q := newTestQueue(t, filepath.Join(t.TempDir(), "empty.db"), queue.Config{}, false)
	ctx := ctxT(t)
	_, err := q.Enqueue(ctx, queue.NewJob{Queue: "q"})
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, queue.ErrNotMigrated) || !strings.Contains(err.Error(), "dbq migrate up") {
			t.Fatalf("%s: %v, want ErrNotMigrated", what, err)
		}
	}
	check("Enqueue", err)
	_, err = q.Stats(ctx)
	check("Stats", err)
	c, err := q.NewClaimer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Claim(ctx, "q", 1)
	check("Claim", err)
	check("Complete", c.Complete(ctx, []queue.Lease{{ID: 1, Token: 1}}))
	check("Retry", c.Retry(ctx, []queue.RetryParams{{Lease: queue.Lease{ID: 1, Token: 1}}}))
	check("Release", c.Release(ctx, []queue.Lease{{ID: 1, Token: 1}}))
	check("Extend", c.Extend(ctx, []queue.Lease{{ID: 1, Token: 1}}))
	_, err = driverOf(t, q).Rescue(ctx)
	check("Rescue", err)
}

func TestDuplicate(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{})
	c := newClaimer(t, q)
	enqueue(t, q, queue.NewJob{Queue: "q", DedupeKey: "k"})
	_, err := q.Enqueue(ctxT(t), queue.NewJob{Queue: "q", DedupeKey: "other"}, queue.NewJob{Queue: "q", DedupeKey: "k"})
	if !errors.Is(err, queue.ErrDuplicate) {
		t.Fatalf("duplicate: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "dbq: ") {
		t.Fatalf("message %q", err)
	}
	wantCounts(t, q, "q", 1, 0, 0, 0) // the batch inserted nothing
	_, err = q.Enqueue(ctxT(t), queue.NewJob{Queue: "q", DedupeKey: "x"}, queue.NewJob{Queue: "q", DedupeKey: "x"})
	if !errors.Is(err, queue.ErrDuplicate) {
		t.Fatalf("duplicate within a batch: %v", err)
	}
	enqueue(t, q, queue.NewJob{Queue: "elsewhere", DedupeKey: "k"}, queue.NewJob{Queue: "q"}, queue.NewJob{Queue: "q"})
	jobs := claim(t, c, "q", 1)
	if jobs[0].DedupeKey != "k" {
		t.Fatalf("DedupeKey %q", jobs[0].DedupeKey)
	}
	if err := c.Complete(ctxT(t), leasesOf(jobs)); err != nil {
		t.Fatal(err)
	}
	enqueue(t, q, queue.NewJob{Queue: "q", DedupeKey: "k"}) // free again
}

func TestEnqueueTx(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{})
	db := driverOf(t, q).DB()
	ctx := ctxT(t)

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueTx(ctx, tx, queue.NewJob{Queue: "q"}, queue.NewJob{Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, q, "q", 0, 0, 0, 0)

	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := q.EnqueueTx(ctx, tx, queue.NewJob{Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := jobIDs(claim(t, newClaimer(t, q), "q", 5)); !slices.Equal(got, ids) {
		t.Fatalf("claimed %v, want %v", got, ids)
	}

	for _, bad := range []any{db, "tx", 42} {
		if _, err := q.EnqueueTx(ctx, bad, queue.NewJob{Queue: "q"}); !errors.Is(err, queue.ErrUnsupportedTx) {
			t.Fatalf("EnqueueTx(%T): %v", bad, err)
		}
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{MaxPayloadBytes: 2 << 20})
	c := newClaimer(t, q)
	big := bytes.Repeat([]byte{0xff, 0x00, 'a'}, 1<<19)
	payloads := [][]byte{nil, {}, {0}, {0, 0, 0}, []byte("a\x00b"), {0xff, 0xfe, 0xc3, 0x28}, []byte(`{"json":true}`), big}
	var jobs []queue.NewJob
	for _, p := range payloads {
		jobs = append(jobs, queue.NewJob{Queue: "q", Payload: p})
	}
	ids := enqueue(t, q, jobs...)
	got := claim(t, c, "q", len(payloads))
	if !slices.Equal(jobIDs(got), ids) {
		t.Fatalf("claimed %v, want %v", jobIDs(got), ids)
	}
	for i, j := range got {
		if j.Payload == nil || !bytes.Equal(j.Payload, payloads[i]) {
			t.Fatalf("payload %d: got %d bytes %q…, want %d bytes", i, len(j.Payload), j.Payload[:min(len(j.Payload), 8)], len(payloads[i]))
		}
	}
	if _, err := q.Enqueue(ctxT(t), queue.NewJob{Queue: "q", Payload: make([]byte, 2<<20+1)}); !errors.Is(err, queue.ErrPayloadTooLarge) {
		t.Fatalf("oversized payload: %v", err)
	}
}

func TestLargeBatchEnqueue(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{})
	jobs := make([]queue.NewJob, 3*enqueueChunk+7)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: "q", Payload: fmt.Appendf(nil, "%d", i), Priority: int16(i % 3)}
	}
	ids := enqueue(t, q, jobs...)
	if !slices.IsSorted(ids) || ids[len(ids)-1]-ids[0] != int64(len(ids)-1) {
		t.Fatalf("ids not consecutive in input order")
	}
	got := claim(t, newClaimer(t, q), "q", len(jobs))
	byID := map[int64]string{}
	for _, j := range got {
		byID[j.ID] = string(j.Payload)
	}
	for i, id := range ids {
		if byID[id] != fmt.Sprint(i) {
			t.Fatalf("id %d (input %d) has payload %q", id, i, byID[id])
		}
	}
}

func TestValidationAndClose(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{})
	ctx := ctxT(t)
	c := newClaimer(t, q)
	for _, n := range []int{0, -1} {
		if _, err := c.Claim(ctx, "q", n); !errors.Is(err, queue.ErrInvalidLimit) {
			t.Fatalf("Claim n=%d: %v", n, err)
		}
	}
	for _, name := range []string{"", "a b", "x'; DROP TABLE dbq_jobs; --", strings.Repeat("a", dialect.MaxQueueLen+1)} {
		if _, err := c.Claim(ctx, name, 1); !errors.Is(err, queue.ErrInvalidQueue) {
			t.Fatalf("Claim queue %q: %v", name, err)
		}
		if _, err := q.Enqueue(ctx, queue.NewJob{Queue: name}); !errors.Is(err, queue.ErrInvalidQueue) {
			t.Fatalf("Enqueue queue %q: %v", name, err)
		}
	}
	for _, op := range []func() error{
		func() error { return c.Complete(ctx, nil) },
		func() error { return c.Release(ctx, nil) },
		func() error { return c.Extend(ctx, nil) },
		func() error { return c.Retry(ctx, nil) },
	} {
		if err := op(); err != nil {
			t.Fatalf("empty batch: %v", err)
		}
	}

	// Close gives back what the claimer holds, not what it lost or ended.
	ids := enqueue(t, q, queue.NewJob{Queue: "q"}, queue.NewJob{Queue: "q"}, queue.NewJob{Queue: "q"})
	jobs := claim(t, c, "q", 3)
	if err := c.Complete(ctx, leasesOf(jobs[:1])); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wantCounts(t, q, "q", 2, 0, 0, 0)
	if _, err := c.Claim(ctx, "q", 1); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("Claim after Close: %v", err)
	}
	if err := c.Complete(ctx, leasesOf(jobs)); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("Complete after Close: %v", err)
	}
	if err := c.Close(ctx); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}

	// A killed claimer gives nothing back.
	k := newClaimer(t, q)
	held := claim(t, k, "q", 5)
	if !slices.Equal(jobIDs(held), ids[1:]) {
		t.Fatalf("claimed %v", jobIDs(held))
	}
	k.abandon()
	if err := k.Close(ctx); err != nil {
		t.Fatalf("Close after Kill: %v", err)
	}
	wantCounts(t, q, "q", 0, 0, 2, 0)

	// A closed Queue refuses everything; its claimers too.
	c2 := newClaimer(t, q)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "q"}); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("Enqueue after Close: %v", err)
	}
	if _, err := c2.Claim(ctx, "q", 1); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("Claim after Queue.Close: %v", err)
	}
	if _, err := driverOf(t, q).Enqueue(ctx, nil, []queue.NewJob{{Queue: "q"}}); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("Driver.Enqueue after Close: %v", err)
	}
}

func TestCancelledClaimLeavesNothing(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{})
	c := newClaimer(t, q)
	enqueue(t, q, queue.NewJob{Queue: "q"}, queue.NewJob{Queue: "q"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Claim(ctx, "q", 2); !errors.Is(err, context.Canceled) {
		t.Fatalf("Claim with a cancelled ctx: %v", err)
	}
	wantCounts(t, q, "q", 2, 0, 0, 0)

	// Cancels racing the claim: whatever Claim returns is all that is held.
	held := 0
	for i := range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%20)*20*time.Microsecond)
		jobs, err := c.Claim(ctx, "q", 1)
		cancel()
		if err == nil && len(jobs) == 1 {
			if err := c.Release(context.Background(), leasesOf(jobs)); err != nil {
				t.Fatal(err)
			}
			held++
		}
		wantCounts(t, q, "q", 2, 0, 0, 0)
	}
	t.Logf("%d of 200 racing claims won", held)
	if left := leftovers(t, c); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
	// The pool is clean: no connection was left inside a transaction.
	enqueue(t, q, queue.NewJob{Queue: "q"})
	if got := claim(t, c, "q", 5); len(got) != 3 {
		t.Fatalf("claimed %d, want 3", len(got))
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		path string
		cfg  queue.Config
		want error
	}{
		"empty path":  {"", queue.Config{}, queue.ErrInvalidConfig},
		"memory":      {":memory:", queue.Config{}, queue.ErrInvalidConfig},
		"memory mode": {"file:x?mode=memory", queue.Config{}, queue.ErrInvalidConfig},
		"bad prefix":  {filepath.Join(dir, "a.db"), queue.Config{Prefix: `x"y`}, queue.ErrInvalidIdentifier},
		"bad lease":   {filepath.Join(dir, "a.db"), queue.Config{Lease: time.Microsecond}, queue.ErrInvalidConfig},
		"negative":    {filepath.Join(dir, "a.db"), queue.Config{MaxAttempts: -1}, queue.ErrInvalidConfig},
	} {
		if _, err := Open(ctx, tc.path, Config{Config: tc.cfg}); !errors.Is(err, tc.want) {
			t.Errorf("%s: Open: %v, want %v", name, err, tc.want)
		}
	}
	if _, err := Open(ctx, filepath.Join(dir, "no", "such", "dir", "a.db"), Config{}); err == nil {
		t.Error("Open in a missing directory succeeded")
	}
	if _, err := New(nil, Config{}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("New(nil): %v", err)
	}
	if err := Migrate(ctx, nil, Config{}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("Migrate(nil): %v", err)
	}
}

func TestPrefixAndNewWithOwnDB(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	path := filepath.Join(t.TempDir(), "own.db")
	a := newTestQueue(t, path, queue.Config{Prefix: "a_"}, true)
	dsn, err := DSN(path)
	if err != nil {
		t.Fatal(err)
	}
	db, err := openDB(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cfg := Config{Config: queue.Config{Prefix: "b_", Schema: "ignored"}}
	if err := Migrate(ctx, db, cfg); err != nil {
		t.Fatal(err)
	}
	b, err := New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	enqueue(t, a, queue.NewJob{Queue: "q"})
	enqueue(t, b, queue.NewJob{Queue: "q"}, queue.NewJob{Queue: "q"})
	wantCounts(t, a, "q", 1, 0, 0, 0)
	wantCounts(t, b, "q", 2, 0, 0, 0)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("Close closed the caller's *sql.DB: %v", err)
	}
}

func TestDSN(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"jobs.db", "jobs.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"},
		{"/a b/jobs.db", "/a b/jobs.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"},
		{"j.db?_pragma=busy_timeout(50)&_txlock=deferred", "j.db?_pragma=busy_timeout(50)&_txlock=deferred&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"},
		{"j.db?_journal=DELETE&_sync=FULL", "j.db?_journal=DELETE&_sync=FULL&_pragma=busy_timeout(10000)&_txlock=immediate"},
		{"j.db?_pragma=foreign_keys(1)", "j.db?_pragma=foreign_keys(1)&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"},
	} {
		got, err := DSN(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("DSN(%q) = %q, %v\nwant %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "?a=b", ":memory:", "x.db?mode=memory", "x.db?%zz"} {
		if _, err := DSN(bad); !errors.Is(err, queue.ErrInvalidConfig) {
			t.Errorf("DSN(%q): %v", bad, err)
		}
	}
}

func TestStatements(t *testing.T) {
	t.Parallel()
	s, err := loadStatements(dialect.Names{Prefix: "pfx_"})
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{
		"claim": s.claim.text, "complete": s.complete.text, "retry": s.retry.text, "release": s.release.text,
		"extend": s.extend.text, "rescue": s.rescue.text, "stats": s.stats.text, "enqueue(3)": s.enqueue(3).text,
		"enqueue(1)": s.enqueue(1).text, "enqueue(full)": s.enqueue(enqueueChunk).text,
	}
	for name, text := range all {
		if strings.Contains(text, "{{") || strings.Contains(text, "dbq_jobs") {
			t.Errorf("%s: unrendered marker or hard-coded table:\n%s", name, text)
		}
		if !strings.Contains(text, `"pfx_jobs"`) {
			t.Errorf("%s: table not spliced:\n%s", name, text)
		}
		if strings.Contains(text, "'now'") || strings.Contains(text, "datetime(") {
			t.Errorf("%s: unexpected clock expression", name)
		}
	}
	if n := strings.Count(s.enqueue(3).text, "?"); n != 3*enqueueRowParams {
		t.Errorf("enqueue(3) has %d parameters", n)
	}
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"abc", 5, "abc"},
		{"abcdef", 3, "abc"},
		{"aé", 2, "a"},
		{"aéb", 3, "aé"},
		{"日本", 4, "日"},
		{"\xff\xff\xff\xff\xff", 3, "\xff\xff\xff"},
	} {
		if got := truncate(tc.in, tc.max); got != tc.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

func TestLeftoversSeesAnOpenTransaction(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{})
	c := newClaimer(t, q)
	if left := leftovers(t, c); len(left) != 0 {
		t.Fatalf("idle queue: %v", left)
	}
	tx, err := driverOf(t, q).DB().BeginTx(ctxT(t), nil) // BEGIN IMMEDIATE via the DSN
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if left := leftovers(t, c); len(left) != 1 {
		t.Fatalf("open write transaction not seen: %v", left)
	}
}

var jobIDs = queue.IDs

var leasesOf = queue.Leases
