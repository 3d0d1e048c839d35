package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// wantLocks fails unless c's session holds advisory locks for exactly the
// jobs want, and c's own record agrees.
func wantLocks(t *testing.T, step string, c *AdvisoryClaimer, want []int64) {
	t.Helper()
	want = slices.Clone(want)
	slices.Sort(want)
	if got := lockedIDs(t, c.backendPID()); !slices.Equal(got, want) {
		t.Fatalf("%s: session holds locks %v, want %v", step, got, want)
	}
	if got := c.heldIDs(); !slices.Equal(got, want) {
		t.Fatalf("%s: claimer records %v, want %v", step, got, want)
	}
}

// TestAdvisoryHoldsExactlyItsLocks: the claimer's session holds the locks of
// exactly the jobs it returned and has not ended, after claims that walk
// past rows another claimer holds, partial completes, releases, retries,
// claims cut off by their context and claims of an empty queue.
func TestAdvisoryHoldsExactlyItsLocks(t *testing.T) {
	t.Parallel()
	q := newQueue(t, Config{}, true)
	enqueueN(t, q, "locks", 500)
	other := advisoryClaimer(t, q)
	first := claim(t, other, "locks", 60) // the claim index's head is busy
	c := advisoryClaimer(t, q)
	var held []int64
	for _, n := range []int{1, 10, 100} {
		jobs := claim(t, c, "locks", n)
		if len(jobs) != n {
			t.Fatalf("Claim(%d) got %d", n, len(jobs))
		}
		for _, j := range jobs {
			if slices.Contains(ids(first), j.ID) {
				t.Fatalf("job %d handed to two claimers", j.ID)
			}
		}
		held = append(held, ids(jobs)...)
		wantLocks(t, "after Claim", c, held)
	}
	wantLocks(t, "other claimer", other, ids(first))

	ctx := testCtx(t)
	var some []queue.Lease
	for _, id := range held[:40] {
		some = append(some, queue.Lease{ID: id, Token: 0})
	}
	for i := range some {
		some[i].Token = mustToken(t, c)
	}
	if err := c.Complete(ctx, some[:20]); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, some[20:30]); err != nil {
		t.Fatal(err)
	}
	if err := c.Retry(ctx, []queue.RetryParams{{Lease: some[30], Delay: time.Hour, Error: "later"}}); err != nil {
		t.Fatal(err)
	}
	held = held[31:]
	wantLocks(t, "after Complete, Release and Retry", c, held)

	claim(t, c, "nothing-here", 10)
	wantLocks(t, "after an empty claim", c, held)

	pre, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Claim(pre, "locks", 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("Claim with a cancelled context: %v", err)
	}
	wantLocks(t, "after a Claim with a cancelled context", c, held)

	cut := 0
	for i := range 40 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(4000))*time.Microsecond)
		jobs, err := c.Claim(ctx, "locks", 20)
		cancel()
		if err != nil {
			cut++
			if len(jobs) != 0 {
				t.Fatalf("a failed claim returned %d jobs", len(jobs))
			}
		}
		held = append(held, ids(jobs)...)
		wantLocks(t, "after a claim cut off by its context", c, held)
		if left := advisoryLeftovers(t, c); len(left) > 0 {
			t.Fatalf("after claim %d (err %v) the session has %v", i, err, left)
		}
	}
	t.Logf("%d of 40 claims cut off by their context; the claimer holds %d jobs", cut, len(held))
}

func mustToken(t *testing.T, c *AdvisoryClaimer) int64 {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token
}

// TestAdvisoryKillGivesJobsBackAtOnce: when a claimer's server process is
// terminated, its jobs are claimable at once, its leases are lost, and its
// next Claim works on a new connection with a new token.
func TestAdvisoryKillGivesJobsBackAtOnce(t *testing.T) {
	t.Parallel()
	q := newQueue(t, Config{}, true)
	enqueueN(t, q, "kill", 10)
	victim := advisoryClaimer(t, q)
	held := claim(t, victim, "kill", 6)
	oldPID := victim.backendPID()
	kill(t, victim)

	b := advisoryClaimer(t, q)
	got := claim(t, b, "kill", 10) // no waiting: the locks went with the process
	if len(got) != 10 {
		t.Fatalf("right after the kill another claimer got %d of 10 jobs", len(got))
	}
	ctx := testCtx(t)
	var lost *queue.LeaseLostError
	if err := victim.Complete(ctx, leases(held)); !errors.As(err, &lost) || len(lost.IDs) != len(held) {
		t.Fatalf("dead claimer's Complete: %v, want all %d leases lost", err, len(held))
	}
	if err := victim.Extend(ctx, leases(held)); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("dead claimer's Extend: %v", err)
	}
	if err := b.Release(ctx, leases(got)); err != nil {
		t.Fatal(err)
	}
	again := claim(t, victim, "kill", 3)
	if len(again) != 3 || again[0].Token == held[0].Token || victim.backendPID() == oldPID {
		t.Fatalf("after reconnecting: %d jobs, token %d (was %d), pid %d (was %d)",
			len(again), again[0].Token, held[0].Token, victim.backendPID(), oldPID)
	}
	wantLocks(t, "after reconnecting", victim, ids(again))
}

// TestAdvisoryStaleToken: a lease with another token, of a job the claimer
// does not hold, or of a job another claimer holds, is lost and changes
// nothing; Close gives every held job back at once.
func TestAdvisoryStaleToken(t *testing.T) {
	t.Parallel()
	q := newQueue(t, Config{}, true)
	enqueueN(t, q, "stale", 4)
	a, b := advisoryClaimer(t, q), advisoryClaimer(t, q)
	ja := claim(t, a, "stale", 2)
	jb := claim(t, b, "stale", 2)
	ctx := testCtx(t)
	forged := queue.Lease{ID: ja[0].ID, Token: ja[0].Token + 1}
	for name, err := range map[string]error{
		"forged token":         a.Complete(ctx, []queue.Lease{forged}),
		"another claimer's":    a.Complete(ctx, leases(jb[:1])),
		"retry another's":      a.Retry(ctx, []queue.RetryParams{{Lease: jb[1].Lease(), Error: "x"}}),
		"release forged token": a.Release(ctx, []queue.Lease{forged}),
		"extend forged token":  a.Extend(ctx, []queue.Lease{forged}),
	} {
		var lost *queue.LeaseLostError
		if !errors.As(err, &lost) || len(lost.IDs) != 1 {
			t.Errorf("%s: %v, want one lost lease", name, err)
		}
	}
	if n := countRows(t, q, ""); n != 4 {
		t.Fatalf("%d jobs left, want 4", n)
	}
	wantLocks(t, "a", a, ids(ja))
	wantLocks(t, "b", b, ids(jb))
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(ctx); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if err := a.Complete(ctx, leases(ja)); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("Complete after Close: %v", err)
	}
	if got := claim(t, b, "stale", 10); !slices.Equal(ids(got), ids(ja)) {
		t.Fatalf("after a closed, b claimed %v, want %v", ids(got), ids(ja))
	}
}

// TestAdvisoryQueueCloseClosesClaimers: closing the Queue gives back the
// jobs and connections of claimers left open, so a pool the Queue made can
// close.
func TestAdvisoryQueueCloseClosesClaimers(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	cfg := Config{}
	cfg.Schema = newSchema(t, pool)
	if err := Migrate(testCtx(t), pool, cfg); err != nil {
		t.Fatal(err)
	}
	q, err := New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	enqueueN(t, q, "left", 3)
	c, err := q.NewClaimer(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	jobs := claim(t, c, "left", 3)
	pid := c.(*AdvisoryClaimer).backendPID()
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if got := lockedIDs(t, pid); len(got) != 0 {
		t.Fatalf("after Queue.Close the connection still holds %v", got)
	}
	if _, err := c.Claim(testCtx(t), "left", 1); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("Claim after Queue.Close: %v", err)
	}
	q2, err := New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	if got := claim(t, newClaimer(t, q2), "left", 3); !slices.Equal(ids(got), ids(jobs)) {
		t.Fatalf("claimed %v after Close, want %v", ids(got), ids(jobs))
	}
}

// TestAdvisoryCancelMidWalkLeaksNothing cuts a claim off in the middle of
// its walk, after it has locked some rows: the locks it took are found and
// released, and the claimer holds nothing.
func TestAdvisoryCancelMidWalkLeaksNothing(t *testing.T) {
	t.Parallel()
	q := newQueue(t, Config{}, true)
	all := enqueueN(t, q, "walk", 6000)
	ctx := testCtx(t)
	// Another session holds every other job, so the walk is long and
	// alternates between rows it locks and rows it skips.
	other, err := testPool(t).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = other.Exec(context.Background(), "SELECT pg_advisory_unlock_all()")
		other.Release()
	}()
	var even []int64
	for _, id := range all {
		if id%2 == 0 {
			even = append(even, id)
		}
	}
	if _, err := other.Exec(ctx, "SELECT pg_advisory_lock($1::regclass::oid::int4, id::bit(32)::int4) FROM unnest($2::int8[]) AS id",
		driverOf(t, q).Table(), even); err != nil {
		t.Fatal(err)
	}
	c := advisoryClaimer(t, q)
	claim(t, c, "walk", 1) // connect and warm up the statement
	held := c.heldIDs()
	// Deadlines from well under a walk's time up: the first one that ends
	// the statement after it has locked rows is the case under test. A
	// claim that beat its deadline gives its jobs back, so that the next
	// walk is as long.
	for _, d := range []time.Duration{500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond,
		5 * time.Millisecond, 8 * time.Millisecond, 13 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond} {
		cctx, cancel := context.WithTimeout(context.Background(), d)
		start := time.Now()
		jobs, err := c.Claim(cctx, "walk", 2000)
		cancel()
		t.Logf("claim cut off after %v: %d jobs, err %v, took %v, %d stray locks released so far",
			d, len(jobs), err, time.Since(start).Round(time.Millisecond), c.swept.Load())
		if err == nil {
			if err := c.Release(ctx, queue.Leases(jobs)); err != nil {
				t.Fatal(err)
			}
		} else if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("cut-off claim: %v, want a deadline error", err)
		}
		wantLocks(t, "after a claim cut off mid-walk", c, held)
		if c.swept.Load() > 0 {
			break
		}
	}
	if c.swept.Load() == 0 {
		t.Fatal("no claim was cut off after it had locked rows; the test proves nothing")
	}
}

// TestAdvisoryWalkCountsSkipped: a walk counts the rows it passed because
// another session held them, row by row, and starts from zero each time
// (HeldSkipped adds them up); a claimer whose walk filled its batch
// resumes the next at the first row it locked rather than at the head, and
// still takes an urgent job first.
func TestAdvisoryWalkCountsSkipped(t *testing.T) {
	q := newQueue(t, Config{}, true)
	ctx := testCtx(t)
	ids := enqueueN(t, q, "w", 100)
	a, b := advisoryClaimer(t, q), advisoryClaimer(t, q)
	held := claim(t, a, "w", 30) // the first 30 in claim order
	if !slices.Equal(jobIDs(held), ids[:30]) {
		t.Fatalf("first claimer took %v, want the first 30 of %v", jobIDs(held), ids)
	}
	b.mu.Lock()
	rows, err := b.walk(ctx, &walkPlan{queue: "w", heldIDs: []int64{}, n: 5})
	b.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 5 {
		t.Fatalf("walk locked %d rows, want 5", len(rows))
	}
	for i, r := range rows {
		if r.ID != ids[30+i] || r.Skipped != 30 {
			t.Fatalf("row %d: id %d skipped %d, want id %d skipped 30", i, r.ID, r.Skipped, ids[30+i])
		}
	}
	// A second walk of the same session counts afresh.
	b.mu.Lock()
	rows, err = b.walk(ctx, &walkPlan{queue: "w", heldIDs: []int64{ids[30], ids[31], ids[32], ids[33], ids[34]}, n: 1})
	b.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].ID != ids[35] || rows[0].Skipped != 30 {
		t.Fatalf("second walk: %+v, want id %d skipped 30 (held ids are passed over, not counted)", rows, ids[35])
	}
	// Through Claim: skipping 36 (30 held by a, 6 by b's walks) to lock 5.
	c := advisoryClaimer(t, q)
	got := claim(t, c, "w", 5)
	if !slices.Equal(jobIDs(got), ids[36:41]) {
		t.Fatalf("claim took %v, want %v", jobIDs(got), ids[36:41])
	}
	c.mu.Lock()
	resume := c.cursors["w"].resume
	c.mu.Unlock()
	if resume == nil || resume.ID != ids[36] {
		t.Fatalf("resume point %+v, want the first row locked, %d", resume, ids[36])
	}
	if got := c.HeldSkipped(); got != 36 {
		t.Fatalf("HeldSkipped = %d, want 36", got)
	}
	wantLocks(t, "after the walks", a, ids[:30])
	// A resumed walk still reads a lower priority number from its start.
	urgent, err := q.Enqueue(ctx, queue.NewJob{Queue: "w", Priority: -1})
	if err != nil {
		t.Fatal(err)
	}
	if got := claim(t, c, "w", 1); len(got) != 1 || got[0].ID != urgent[0] {
		t.Fatalf("resumed claim took %v, want the urgent job %d", jobIDs(got), urgent[0])
	}
}

func jobIDs(jobs []*queue.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// TestAdvisoryDearHeadWalkWaits: after a walk from the head that took
// long, a claimer puts off its next periodic head walk (headGap): jobs
// given back behind its resume point wait out the gap, then are claimed.
func TestAdvisoryDearHeadWalkWaits(t *testing.T) {
	for _, c := range []struct{ took, resumed, want time.Duration }{
		{time.Millisecond, 0, 0},
		{100 * time.Millisecond, 0, 900 * time.Millisecond},
		{100 * time.Millisecond, 20 * time.Millisecond, 900 * time.Millisecond},
		{100 * time.Millisecond, 30 * time.Millisecond, 0}, // everything is slow, not the head walk
		{2 * time.Second, time.Millisecond, maxHeadGap},
	} {
		if got := headGap(c.took, c.resumed, defaultCheapHeadWalk); got != c.want {
			t.Errorf("headGap(%v, %v) = %v, want %v", c.took, c.resumed, got, c.want)
		}
	}
	q := newQueue(t, Config{}, true)
	ctx := testCtx(t)
	ids := enqueueN(t, q, "h", 60)
	b, c := advisoryClaimer(t, q), advisoryClaimer(t, q)
	front := claim(t, b, "h", 2)
	// c's first walk prepares its statements, and is not timed.
	if got := claim(t, c, "other", 1); len(got) != 0 {
		t.Fatalf("claimed %v from an empty queue", jobIDs(got))
	}
	// Every head walk counts as dear from here on.
	c.mu.Lock()
	c.cheapHeadWalk = -1
	c.mu.Unlock()
	if got := claim(t, c, "h", 1); len(got) != 1 || got[0].ID != ids[2] { // a head walk
		t.Fatalf("claimed %v, want [%d]", jobIDs(got), ids[2])
	}
	c.mu.Lock()
	gapSet := c.cursors["h"].notHeadBefore.After(time.Now())
	c.cursors["h"].notHeadBefore = time.Now().Add(time.Hour)
	c.mu.Unlock()
	if !gapSet {
		t.Fatal("a dear head walk did not put off the next one")
	}
	// The front two come back behind c's resume point.
	if err := b.Release(ctx, queue.Leases(front)); err != nil {
		t.Fatal(err)
	}
	behind := func(jobs []*queue.Job) bool {
		return len(jobs) == 1 && (jobs[0].ID == ids[0] || jobs[0].ID == ids[1])
	}
	for i := range 2 * resumeEvery {
		if got := claim(t, c, "h", 1); behind(got) {
			t.Fatalf("claim %d within the gap took %v, behind the resume point: the head walk was not put off", i, jobIDs(got))
		}
	}
	c.mu.Lock()
	c.cursors["h"].notHeadBefore = time.Time{}
	c.mu.Unlock()
	for i := range resumeEvery {
		if got := claim(t, c, "h", 1); behind(got) {
			return
		} else if len(got) == 0 {
			t.Fatalf("claim %d after the gap took nothing", i)
		}
	}
	t.Fatalf("jobs %v were not claimed within %d claims after the gap", ids[:2], resumeEvery)
}

// TestAdvisoryClaimersShareAFront: a claimer's resumed walk starts at the
// last row any claimer of its Driver locked (fronts) when that is past
// its own resume point, so it does not read past the rows the others took
// since its last claim; and the walks from the head, which bring back the
// jobs behind every resume point, are every resumeEvery-th walk of the
// Driver's claimers, not of each one.
func TestAdvisoryClaimersShareAFront(t *testing.T) {
	q := newQueue(t, Config{}, true)
	ctx := testCtx(t)
	ids := enqueueN(t, q, "f", 100)
	a, b := advisoryClaimer(t, q), advisoryClaimer(t, q)
	if got := claim(t, a, "f", 10); !slices.Equal(jobIDs(got), ids[:10]) {
		t.Fatalf("a took %v, want %v", jobIDs(got), ids[:10])
	}
	if got := claim(t, b, "f", 10); !slices.Equal(jobIDs(got), ids[10:20]) {
		t.Fatalf("b took %v, want %v", jobIDs(got), ids[10:20])
	}
	// a's own resume point is ids[0]; b's 10 lie between it and the front.
	skipped := a.HeldSkipped()
	if got := claim(t, a, "f", 10); !slices.Equal(jobIDs(got), ids[20:30]) {
		t.Fatalf("a's second claim took %v, want %v", jobIDs(got), ids[20:30])
	}
	if got := a.HeldSkipped() - skipped; got != 1 {
		t.Fatalf("a's resumed walk passed %d rows held by b, want 1 (the front itself): it did not start at the front", got)
	}
	// A job due before all the others is behind every resume point and the
	// front: a walk from the head finds it within resumeEvery walks of the
	// two claimers together.
	old, err := q.Enqueue(ctx, queue.NewJob{Queue: "f", RunAt: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range resumeEvery {
		c := []*AdvisoryClaimer{a, b}[i%2]
		got := claim(t, c, "f", 1)
		if len(got) == 1 && got[0].ID == old[0] {
			return
		}
	}
	t.Fatalf("the job behind the front was not claimed within %d walks of the Driver's claimers", resumeEvery)
}

// TestAdvisoryUnlockWaitsForTheDelete: Complete sends the unlock in the
// delete's round trip, in a transaction of its own that unlocks only jobs
// no longer ready. A delete that fails (a trigger raises here) leaves
// every job locked and in the table; a delete that finds its rows gone
// (deleted behind the claimer's back) still unlocks them, and reports
// their leases lost.
func TestAdvisoryUnlockWaitsForTheDelete(t *testing.T) {
	q := newQueue(t, Config{}, true)
	ctx := testCtx(t)
	d := driverOf(t, q)
	enqueueN(t, q, "gate", 10)
	c := advisoryClaimer(t, q)
	jobs := claim(t, c, "gate", 6)
	if len(jobs) != 6 {
		t.Fatalf("claimed %d jobs, want 6", len(jobs))
	}
	fn := strings.TrimSuffix(d.stmts.table, `"`) + `_refuse"` // in the table's schema
	for _, sql := range []string{
		`CREATE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$`,
		`CREATE TRIGGER refuse BEFORE DELETE ON ` + d.stmts.table + ` FOR EACH ROW EXECUTE FUNCTION ` + fn + `()`,
	} {
		if _, err := testPool(t).Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Complete(ctx, queue.Leases(jobs[:2])); err == nil || errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("Complete with the delete refused: %v, want its error", err)
	}
	wantLocks(t, "after a refused Complete", c, queue.IDs(jobs))
	if n := countRows(t, q, ""); n != 10 {
		t.Fatalf("%d jobs in the table, want all 10", n)
	}
	if _, err := testPool(t).Exec(ctx, `DROP TRIGGER refuse ON `+d.stmts.table); err != nil {
		t.Fatal(err)
	}

	// Deleted behind its back: the delete finds nothing.
	if _, err := testPool(t).Exec(ctx, `DELETE FROM `+d.stmts.table+` WHERE id = ANY($1)`, queue.IDs(jobs[:2])); err != nil {
		t.Fatal(err)
	}
	var lost *queue.LeaseLostError
	if err := c.Complete(ctx, queue.Leases(jobs[:2])); !errors.As(err, &lost) || !sameIDs(lost.IDs, queue.IDs(jobs[:2])) {
		t.Fatalf("Complete of jobs deleted elsewhere: %v, want both leases lost", err)
	}
	wantLocks(t, "after completing vanished jobs", c, queue.IDs(jobs[2:]))
	if err := c.Complete(ctx, queue.Leases(jobs[2:])); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	wantLocks(t, "after Complete", c, nil)
	if n := countRows(t, q, ""); n != 4 {
		t.Fatalf("%d jobs in the table, want the 4 never claimed", n)
	}
}

// TestAdvisoryPostCheckReadsOnlyItsWalk: the post-check reads the ids its
// walk recorded in the session (dbq.walked). Should the record be stale (a
// walk that locks nothing may leave it as it was, depending on the plan;
// set by hand here), the jobs named there - held already, or by nobody -
// are not handed out.
func TestAdvisoryPostCheckReadsOnlyItsWalk(t *testing.T) {
	q := newQueue(t, Config{}, true)
	ids := enqueueN(t, q, "full", 8)
	c := advisoryClaimer(t, q)
	held := claim(t, c, "full", 5)
	if len(held) != 5 {
		t.Fatalf("claimed %d jobs, want 5", len(held))
	}
	other := advisoryClaimer(t, q)
	theirs := claim(t, other, "full", 3)
	stale := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(ids)), ","), "[]")
	for _, name := range []string{"empty", "full"} {
		c.mu.Lock()
		_, err := c.conn.Exec(testCtx(t), "SELECT set_config('dbq.walked', $1, false)", stale)
		c.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if got := claim(t, c, name, 5); len(got) != 0 {
			t.Fatalf("a claim of %q with nothing claimable returned %v (held: %v)", name, queue.IDs(got), queue.IDs(held))
		}
		wantLocks(t, "after a claim of "+name, c, queue.IDs(held))
	}
	// The walk records even an empty result, so a stale record cannot
	// reach the post-check above through this plan; the claim's last
	// step drops such jobs all the same.
	c.mu.Lock()
	got, err := c.keepChecked("full", nil, []*queue.Job{{ID: held[0].ID}, {ID: theirs[0].ID}})
	c.mu.Unlock()
	if err != nil || len(got) != 0 {
		t.Fatalf("jobs the walk did not lock, kept: %v, %v", queue.IDs(got), err)
	}
	wantLocks(t, "after a stale post-check", c, queue.IDs(held))
	if err := other.Complete(testCtx(t), queue.Leases(theirs)); err != nil {
		t.Fatal(err)
	}
}

// sameIDs reports whether a and b hold the same ids, in any order.
func sameIDs(a, b []int64) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// walk runs walk w alone, without the post-check, and returns the rows it
// locked. c.mu is held.
func (c *AdvisoryClaimer) walk(ctx context.Context, w *walkPlan) ([]lockedRow, error) {
	gctx, done := guard(ctx, c.conn.Conn().PgConn())
	defer done()
	var locked []lockedRow
	errs := pipelined(gctx, c.conn.Conn(), c.walkSteps(w, &locked))
	if err := cmp.Or(errs...); err != nil {
		return nil, failed(ctx, "claim", err)
	}
	return locked, nil
}
