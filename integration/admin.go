package integration

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// The scheduling and admin cases of issue 5: unique enqueue, cancel, pause,
// snooze, reviving dead jobs, listing, and a claimer that freezes.

// eventually claims from c until it gets something or wait passes.
func eventually(t *testing.T, c queue.Claimer, name string, n int, wait time.Duration) []*queue.Job {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		if jobs := claim(t, c, name, n); len(jobs) > 0 || time.Now().After(deadline) {
			return jobs
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// EnqueueUniqueReturnsExisting: a second EnqueueUnique with the same key
// returns the first job; once that job completes the key is free again.
func testEnqueueUnique(t *testing.T, s *suite) {
	ctx := ctxFor(t)
	q := s.queue(t, queue.Config{})
	job := queue.NewJob{Queue: "uniq", Payload: []byte("first"), DedupeKey: "k1"}
	id, existed, err := q.EnqueueUnique(ctx, nil, job)
	if err != nil || existed || id == 0 {
		t.Fatalf("first EnqueueUnique = %d, %v, %v; want a new id", id, existed, err)
	}
	job.Payload = []byte("second")
	id2, existed, err := q.EnqueueUnique(ctx, nil, job)
	if err != nil || !existed || id2 != id {
		t.Fatalf("second EnqueueUnique = %d, %v, %v; want %d, true, nil", id2, existed, err, id)
	}
	// The same key in another queue is another job.
	other, existed, err := q.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "uniq2", DedupeKey: "k1"})
	if err != nil || existed || other == id {
		t.Fatalf("EnqueueUnique in another queue = %d, %v, %v; want a new job", other, existed, err)
	}
	wantCounts(t, q, "uniq", 1, 0, 0, 0)
	c := s.claimer(t, q)
	jobs := claim(t, c, "uniq", 10)
	if len(jobs) != 1 || string(jobs[0].Payload) != "first" {
		t.Fatalf("claimed %v, want the first job only", ids(jobs))
	}
	// Held, the key is still taken.
	if id3, existed, err := q.EnqueueUnique(ctx, nil, job); err != nil || !existed || id3 != id {
		t.Fatalf("EnqueueUnique while held = %d, %v, %v; want %d, true, nil", id3, existed, err, id)
	}
	complete(t, c, jobs)
	id4, existed, err := q.EnqueueUnique(ctx, nil, job)
	if err != nil || existed || id4 == id {
		t.Fatalf("EnqueueUnique after completion = %d, %v, %v; want a new job", id4, existed, err)
	}
	wantCounts(t, q, "uniq", 1, 0, 0, 0)
}

// EnqueueUniqueConcurrent: many goroutines racing on one key store one job
// and all get its id.
func testEnqueueUniqueRace(t *testing.T, s *suite) {
	ctx := ctxFor(t)
	q := s.queue(t, queue.Config{})
	const n = 8
	got := make([]int64, n)
	news := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id, existed, err := q.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "race", DedupeKey: "same"})
			if err != nil {
				t.Errorf("EnqueueUnique: %v", err)
			}
			got[i], news[i] = id, !existed
		})
	}
	waitGroup(t, &wg, "the racing EnqueueUnique calls")
	if slices.Min(got) != slices.Max(got) || got[0] == 0 {
		t.Fatalf("racing EnqueueUnique returned ids %v, want one id", got)
	}
	if c := len(slices.DeleteFunc(news, func(b bool) bool { return !b })); c != 1 {
		t.Fatalf("%d callers were told they stored the job, want 1", c)
	}
	wantCounts(t, q, "race", 1, 0, 0, 0)
}

// CancelSkipsHeldJobs: Cancel deletes ready, scheduled and dead jobs and
// leaves a held job to its holder, who can still complete it.
func testCancel(t *testing.T, s *suite) {
	ctx := ctxFor(t)
	q := s.queue(t, queue.Config{})
	ids0 := enqueue(t, q,
		queue.NewJob{Queue: "cancel", Payload: []byte("held"), Priority: -1},
		queue.NewJob{Queue: "cancel", Payload: []byte("dead"), Priority: 0},
		queue.NewJob{Queue: "cancel", Payload: []byte("ready"), Priority: 5},
		queue.NewJob{Queue: "cancel", Payload: []byte("scheduled"), Delay: time.Hour},
	)
	held, dead, ready, sched := ids0[0], ids0[1], ids0[2], ids0[3]
	c := s.claimer(t, q)
	jobs := claim(t, c, "cancel", 2)
	if len(jobs) != 2 || jobs[0].ID != held || jobs[1].ID != dead {
		t.Fatalf("claimed %v, want [%d %d]", ids(jobs), held, dead)
	}
	if err := c.Retry(ctx, []queue.RetryParams{{Lease: jobs[1].Lease(), Error: "x", Dead: true}}); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	wantCounts(t, q, "cancel", 1, 1, 1, 1)
	got, err := q.Cancel(ctx, held, dead, ready, sched, 1<<40)
	if err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if !sameIDs(got, []int64{dead, ready, sched}) {
		t.Fatalf("Cancel deleted %v, want %v", got, []int64{dead, ready, sched})
	}
	wantCounts(t, q, "cancel", 0, 0, 1, 0)
	complete(t, c, jobs[:1])
	wantCounts(t, q, "cancel", 0, 0, 0, 0)
}

// PauseStopsClaims: a paused queue's Claim returns nothing while other
// queues go on; Resume brings it back.
func testPause(t *testing.T, s *suite) {
	ctx := ctxFor(t)
	q := s.queue(t, queue.Config{})
	enqueueN(t, q, "paused", 2)
	enqueueN(t, q, "running", 2)
	if err := q.Pause(ctx, "paused"); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	if err := q.Pause(ctx, "paused"); err != nil {
		t.Fatalf("second Pause: %v", err)
	}
	if got, err := q.Paused(ctx); err != nil || !slices.Equal(got, []string{"paused"}) {
		t.Fatalf("Paused = %v, %v; want [paused]", got, err)
	}
	if st := stats(t, q, "paused"); !st.Paused || st.Ready != 2 {
		t.Fatalf("stats of paused queue: %+v, want Paused and 2 ready", st)
	}
	if st := stats(t, q, "running"); st.Paused {
		t.Fatalf("stats of running queue: %+v, want not Paused", st)
	}
	c := s.claimer(t, q)
	if got := claim(t, c, "paused", 10); len(got) != 0 {
		t.Fatalf("paused queue gave %v", ids(got))
	}
	if got := claim(t, c, "running", 10); len(got) != 2 {
		t.Fatalf("running queue gave %d jobs, want 2", len(got))
	} else {
		complete(t, c, got)
	}
	// Enqueue goes on while paused.
	enqueueN(t, q, "paused", 1)
	if err := q.Resume(ctx, "paused"); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if got, err := q.Paused(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Paused after Resume = %v, %v; want none", got, err)
	}
	if st := stats(t, q, "paused"); st.Paused {
		t.Fatalf("stats after Resume: %+v, want not Paused", st)
	}
	got := claim(t, c, "paused", 10)
	if len(got) != 3 {
		t.Fatalf("resumed queue gave %d jobs, want 3", len(got))
	}
	complete(t, c, got)
}

// SnoozeKeepsAttempt: Retry with Snooze reschedules without spending an
// attempt or touching last_error.
func testSnooze(t *testing.T, s *suite) {
	ctx := ctxFor(t)
	q := s.queue(t, queue.Config{})
	enqueue(t, q, queue.NewJob{Queue: "snooze", MaxAttempts: 3})
	c := s.claimer(t, q)
	jobs := claim(t, c, "snooze", 1)
	if err := c.Retry(ctx, []queue.RetryParams{{Lease: jobs[0].Lease(), Error: "first failure"}}); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	jobs = claim(t, c, "snooze", 1)
	if len(jobs) != 1 || jobs[0].Attempt != 1 {
		t.Fatalf("after retry claimed %v, want the job at attempt 1", ids(jobs))
	}
	const delay = 1200 * time.Millisecond
	err := c.Retry(ctx, []queue.RetryParams{{Lease: jobs[0].Lease(), Delay: delay, Error: "ignored", Dead: true, Snooze: true}})
	if err != nil {
		t.Fatalf("Retry(Snooze): %v", err)
	}
	wantCounts(t, q, "snooze", 0, 1, 0, 0)
	if got := claim(t, c, "snooze", 1); len(got) != 0 {
		t.Fatalf("snoozed job claimed at once: %v", ids(got))
	}
	// A stale token cannot snooze.
	wantErr(t, "Snooze with the old token",
		c.Retry(ctx, []queue.RetryParams{{Lease: jobs[0].Lease(), Delay: delay, Snooze: true}}), queue.ErrLeaseLost)
	got := eventually(t, c, "snooze", 1, 10*time.Second)
	if len(got) != 1 {
		t.Fatal("snoozed job never became claimable")
	}
	if got[0].Attempt != 1 || got[0].LastError != "first failure" || got[0].State != queue.StateClaimed {
		t.Fatalf("snoozed job back with attempt %d, last_error %q, state %q; want 1, %q, claimed",
			got[0].Attempt, got[0].LastError, got[0].State, "first failure")
	}
	complete(t, c, got)
}

// RetryDeadRevivesJobs: dead jobs come back ready with attempt 0, by id or
// all of a queue's at once.
func testRetryDeadAdmin(t *testing.T, s *suite) {
	ctx := ctxFor(t)
	q := s.queue(t, queue.Config{})
	all := enqueueN(t, q, "revive", 4)
	enqueueN(t, q, "other", 1)
	c := s.claimer(t, q)
	jobs := claim(t, c, "revive", 4)
	var kill []queue.RetryParams
	for _, j := range jobs {
		kill = append(kill, queue.RetryParams{Lease: j.Lease(), Error: "fatal", Dead: true})
	}
	if err := c.Retry(ctx, kill); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	oj := claim(t, c, "other", 1)
	if err := c.Retry(ctx, []queue.RetryParams{{Lease: oj[0].Lease(), Dead: true}}); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	wantCounts(t, q, "revive", 0, 0, 0, 4)
	got, err := q.RetryDead(ctx, "revive", all[0], all[1], oj[0].ID)
	if err != nil || !sameIDs(got, all[:2]) {
		t.Fatalf("RetryDead(ids) = %v, %v; want %v (not the other queue's)", got, err, all[:2])
	}
	wantCounts(t, q, "revive", 2, 0, 0, 2)
	got, err = q.RetryDead(ctx, "revive")
	if err != nil || !sameIDs(got, all[2:]) {
		t.Fatalf("RetryDead(all) = %v, %v; want %v", got, err, all[2:])
	}
	wantCounts(t, q, "revive", 4, 0, 0, 0)
	wantCounts(t, q, "other", 0, 0, 0, 1)
	back := claim(t, c, "revive", 10)
	if len(back) != 4 {
		t.Fatalf("claimed %d revived jobs, want 4", len(back))
	}
	for _, j := range back {
		if j.Attempt != 0 || j.LastError != "fatal" {
			t.Errorf("revived job %d: attempt %d, last_error %q; want 0 and %q", j.ID, j.Attempt, j.LastError, "fatal")
		}
	}
	complete(t, c, back)
}

// JobsListsAndPages: Jobs filters by queue and state and pages by AfterID.
func testJobsList(t *testing.T, s *suite) {
	ctx := ctxFor(t)
	q := s.queue(t, queue.Config{})
	a := enqueueN(t, q, "list-a", 5)
	b := enqueueN(t, q, "list-b", 2)
	c := s.claimer(t, q)
	held := claim(t, c, "list-a", 2)
	var got []int64
	var after int64
	for {
		page, err := q.Jobs(ctx, queue.JobFilter{Queue: "list-a", AfterID: after, Limit: 2})
		if err != nil {
			t.Fatalf("Jobs: %v", err)
		}
		if len(page) > 2 {
			t.Fatalf("page of %d, limit 2", len(page))
		}
		if len(page) == 0 {
			break
		}
		for _, j := range page {
			if j.Queue != "list-a" {
				t.Fatalf("job %d of queue %q listed for list-a", j.ID, j.Queue)
			}
			got = append(got, j.ID)
		}
		after = page[len(page)-1].ID
	}
	if !slices.Equal(got, a) {
		t.Fatalf("paged list %v, want %v in id order", got, a)
	}
	claimed, err := q.Jobs(ctx, queue.JobFilter{State: queue.StateClaimed})
	if err != nil || !slices.Equal(ids(claimed), ids(held)) {
		t.Fatalf("claimed jobs listed %v, %v; want %v", ids(claimed), err, ids(held))
	}
	ready, err := q.Jobs(ctx, queue.JobFilter{Queue: "list-b", State: queue.StateReady})
	if err != nil || !slices.Equal(ids(ready), b) {
		t.Fatalf("ready list-b jobs %v, %v; want %v", ids(ready), err, b)
	}
	everything, err := q.Jobs(ctx, queue.JobFilter{})
	if err != nil || len(everything) != 7 {
		t.Fatalf("all jobs: %d, %v; want 7", len(everything), err)
	}
	complete(t, c, held)
}

// FrozenClaimerLosesItsJob: a claimer that stops extending (a frozen
// process) loses its job within two leases; its late Complete changes
// nothing. Where a claim is a lock held while the claimer's connection
// lives, a frozen holder is a live one: it keeps its job past two leases,
// no one else gets it, and its late Complete counts (DeadClaimerGivesJobsBack
// covers the holder whose connection dies).
func testFrozenClaimer(t *testing.T, s *suite) {
	const lease = time.Second
	q := s.queue(t, queue.Config{Lease: lease})
	enqueueN(t, q, "freeze", 1)
	a, b := s.claimer(t, q), s.claimer(t, q)
	held := claim(t, a, "freeze", 1)
	if s.h.LockBased {
		time.Sleep(2*lease + s.h.LeaseSlack)
		if got := claim(t, b, "freeze", 1); len(got) != 0 {
			t.Fatalf("b claimed %v from a live, frozen lock holder", ids(got))
		}
		complete(t, a, held)
		wantCounts(t, q, "freeze", 0, 0, 0, 0)
		return
	}
	got := eventually(t, b, "freeze", 1, 2*lease+s.h.LeaseSlack+time.Second)
	if len(got) != 1 || got[0].ID != held[0].ID {
		t.Fatalf("b claimed %v after a froze, want [%d]", ids(got), held[0].ID)
	}
	wantErr(t, "frozen claimer's Complete", a.Complete(ctxFor(t), leases(held)), queue.ErrLeaseLost)
	wantCounts(t, q, "freeze", 0, 0, 1, 0)
	complete(t, b, got)
	wantCounts(t, q, "freeze", 0, 0, 0, 0)
}

// WorkerSnoozes: a handler that returns Snooze gets its job again after the
// delay with the same attempt.
func testWorkerSnooze(t *testing.T, s *suite) {
	q := s.queue(t, queue.Config{})
	enqueueN(t, q, "wsnooze", 1)
	const delay = 500 * time.Millisecond
	type run struct {
		attempt int
		at      time.Time
	}
	runs := make(chan run, 4)
	var n atomic.Int32
	handler := func(ctx context.Context, j *queue.Job) error {
		runs <- run{j.Attempt, time.Now()}
		if n.Add(1) == 1 {
			return queue.Snooze(delay)
		}
		return nil
	}
	w, err := queue.NewWorker(q, handler, queue.WorkerConfig{Queue: "wsnooze", Concurrency: 1, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r := startWorker(t, ctxFor(t), w)
	first := await(r, runs, "the job's first run")
	second := await(r, runs, "the snoozed job's second run")
	if err := r.stop(0); err != nil {
		t.Errorf("Run: %v", err)
	}
	if first.attempt != 0 || second.attempt != 0 {
		t.Fatalf("attempts %d then %d, want 0 and 0: a snooze spends no attempt", first.attempt, second.attempt)
	}
	// Wall clocks of the test and database differ by less than the delay's
	// slack only roughly, so check the order, not a timing.
	if !second.at.After(first.at) {
		t.Fatal("second run not after the first")
	}
	if st := w.Stats(); st.Snoozed != 1 || st.Retried != 0 {
		t.Fatalf("worker stats %+v, want 1 snoozed and 0 retried", st)
	}
	wantCounts(t, q, "wsnooze", 0, 0, 0, 0)
}
