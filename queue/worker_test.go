package queue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq/internal/memq"
	"github.com/dbqueue/dbq/queue"
)

// spyDriver wraps memq's driver: it records snoozes, which memq does not
// implement (it releases them instead, so the job runs again at once).
type spyDriver struct {
	queue.Driver
	mu      sync.Mutex
	snoozes []queue.RetryParams
}

func (d *spyDriver) NewClaimer(ctx context.Context) (queue.Claimer, error) {
	c, err := d.Driver.NewClaimer(ctx)
	if err != nil {
		return nil, err
	}
	return &spyClaimer{Claimer: c, d: d}, nil
}

func (d *spyDriver) snoozed() []queue.RetryParams {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]queue.RetryParams(nil), d.snoozes...)
}

type spyClaimer struct {
	queue.Claimer
	d *spyDriver
}

func (c *spyClaimer) Retry(ctx context.Context, rs []queue.RetryParams) error {
	var retries []queue.RetryParams
	var releases []queue.Lease
	for _, r := range rs {
		if r.Snooze {
			c.d.mu.Lock()
			c.d.snoozes = append(c.d.snoozes, r)
			c.d.mu.Unlock()
			releases = append(releases, r.Lease)
		} else {
			retries = append(retries, r)
		}
	}
	if len(releases) > 0 {
		if err := c.Claimer.Release(ctx, releases); err != nil {
			return err
		}
	}
	if len(retries) > 0 {
		return c.Claimer.Retry(ctx, retries)
	}
	return nil
}

// wakingDriver is a spyDriver that is a queue.Waker; tests send on wake.
type wakingDriver struct {
	*spyDriver
	wake                chan struct{}
	subscribed, stopped atomic.Int32
	subscribedTo        atomic.Value
}

func (d *wakingDriver) Subscribe(q string) (<-chan struct{}, func()) {
	d.subscribedTo.Store(q)
	d.subscribed.Add(1)
	return d.wake, func() { d.stopped.Add(1) }
}

// recHooks records what a Worker reports.
type recHooks struct {
	mu       sync.Mutex
	claims   int
	asked    int
	got      int
	outcomes map[queue.Outcome]int
	lost     []int64
	ctxOK    bool // every JobEnd got the context JobStart made
	errs     map[queue.Outcome][]error
}

type hookKey struct{}

func newRecHooks() *recHooks {
	return &recHooks{outcomes: map[queue.Outcome]int{}, errs: map[queue.Outcome][]error{}, ctxOK: true}
}

func (h *recHooks) ClaimDone(_ string, asked, got int, _ time.Duration, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claims++
	h.asked += asked
	h.got += got
}

func (h *recHooks) JobStart(ctx context.Context, j *queue.Job) context.Context {
	return context.WithValue(ctx, hookKey{}, j.ID)
}

func (h *recHooks) JobEnd(ctx context.Context, j *queue.Job, o queue.Outcome, took time.Duration, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.outcomes[o]++
	h.errs[o] = append(h.errs[o], err)
	if id, _ := ctx.Value(hookKey{}).(int64); id != j.ID || took < 0 {
		h.ctxOK = false
	}
}

func (h *recHooks) LeasesLost(_ string, ids []int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lost = append(h.lost, ids...)
}

func (h *recHooks) snapshot() (claims, got int, outcomes map[queue.Outcome]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[queue.Outcome]int{}
	for k, v := range h.outcomes {
		out[k] = v
	}
	return h.claims, h.got, out
}

// runWorker starts w and returns a function that stops it and returns
// Run's error.
func runWorker(t *testing.T, w *queue.Worker) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Each way a handler can end reaches the right claimer call, the worker's
// counters and the hooks, and the handler runs on JobStart's context.
func TestWorkerOutcomesAndHooks(t *testing.T) {
	spy := &spyDriver{Driver: memq.New(time.Minute).Driver()}
	q, _ := queue.New(spy, queue.Config{})
	ctx := context.Background()
	ids, err := q.Enqueue(ctx,
		queue.NewJob{Queue: "o", Payload: []byte("ok")},
		queue.NewJob{Queue: "o", Payload: []byte("fail-once")},
		queue.NewJob{Queue: "o", Payload: []byte("perm")},
		queue.NewJob{Queue: "o", Payload: []byte("snooze-once")},
		queue.NewJob{Queue: "o", Payload: []byte("last-attempt"), MaxAttempts: 1},
	)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		runs = map[int64]int{}
	)
	h := func(ctx context.Context, j *queue.Job) error {
		if id, _ := ctx.Value(hookKey{}).(int64); id != j.ID {
			t.Errorf("job %d: handler context lacks JobStart's value (%v)", j.ID, id)
		}
		mu.Lock()
		runs[j.ID]++
		n := runs[j.ID]
		mu.Unlock()
		switch p := string(j.Payload); {
		case p == "fail-once" && n == 1, p == "last-attempt":
			return errors.New("boom")
		case p == "perm":
			return queue.Permanent(errors.New("never"))
		case p == "snooze-once" && n == 1:
			return queue.Snooze(time.Hour)
		}
		return nil
	}
	hooks := newRecHooks()
	w, err := queue.NewWorker(q, h, queue.WorkerConfig{
		Queue: "o", Concurrency: 2, PollInterval: 5 * time.Millisecond, Hooks: hooks,
		Backoff: func(int) time.Duration { return 0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	waitFor(t, "every job to end", func() bool {
		_, _, o := hooks.snapshot()
		return o[queue.OutcomeCompleted] == 3 && o[queue.OutcomeDead] == 2
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	st := w.Stats()
	if st.Completed != 3 || st.Retried != 3 || st.Dead != 2 || st.Snoozed != 1 || st.Released != 0 || st.LeasesLost != 0 {
		t.Errorf("stats %+v: want 3 completed, 3 retried (2 dead), 1 snoozed", st)
	}
	claims, got, o := hooks.snapshot()
	want := map[queue.Outcome]int{queue.OutcomeCompleted: 3, queue.OutcomeRetried: 1, queue.OutcomeDead: 2, queue.OutcomeSnoozed: 1}
	for _, oc := range queue.Outcomes() {
		if o[oc] != want[oc] {
			t.Errorf("hooks saw %d %v, want %d (all: %v)", o[oc], oc, want[oc], o)
		}
	}
	if got != int(st.Claimed) || claims == 0 {
		t.Errorf("ClaimDone: %d claims got %d jobs; worker claimed %d", claims, got, st.Claimed)
	}
	hooks.mu.Lock()
	if !hooks.ctxOK {
		t.Error("a JobEnd did not get JobStart's context")
	}
	var snoozeErr *queue.SnoozeError
	if errs := hooks.errs[queue.OutcomeSnoozed]; len(errs) != 1 || !errors.As(errs[0], &snoozeErr) {
		t.Errorf("JobEnd(snoozed) errors %v, want the Snooze error", errs)
	}
	if errs := hooks.errs[queue.OutcomeCompleted]; errs[0] != nil {
		t.Errorf("JobEnd(completed) error %v, want nil", errs[0])
	}
	hooks.mu.Unlock()

	sn := spy.snoozed()
	if len(sn) != 1 || sn[0].Lease.ID != ids[3] || !sn[0].Snooze || sn[0].Delay != time.Hour {
		t.Errorf("snoozes written %+v: want one for job %d, Snooze set, Delay 1h", sn, ids[3])
	}
}

// A claim that fills its batch is followed by another at once: with an
// hour's poll interval, a backlog of several batches still drains.
func TestWorkerClaimsAgainAfterFullBatch(t *testing.T) {
	q, _ := queue.New(memq.New(time.Minute).Driver(), queue.Config{})
	jobs := make([]queue.NewJob, 40)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: "full"}
	}
	if _, err := q.Enqueue(context.Background(), jobs...); err != nil {
		t.Fatal(err)
	}
	w, _ := queue.NewWorker(q, func(context.Context, *queue.Job) error { return nil },
		queue.WorkerConfig{Queue: "full", Concurrency: 4, PollInterval: time.Hour})
	stop := runWorker(t, w)
	waitFor(t, "the backlog to drain without polling", func() bool { return w.Stats().Completed == 40 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A Waker's wake-up ends an idle worker's wait: with an hour's poll
// interval, a job enqueued after the first (empty) claim still runs. With
// DisableWakeups the worker does not subscribe.
func TestWorkerWakeups(t *testing.T) {
	wd := &wakingDriver{spyDriver: &spyDriver{Driver: memq.New(time.Minute).Driver()}, wake: make(chan struct{}, 1)}
	q, _ := queue.New(wd, queue.Config{})
	hooks := newRecHooks()
	w, _ := queue.NewWorker(q, func(context.Context, *queue.Job) error { return nil },
		queue.WorkerConfig{Queue: "wake", Concurrency: 2, PollInterval: time.Hour, Hooks: hooks})
	stop := runWorker(t, w)
	waitFor(t, "the first claim", func() bool { c, _, _ := hooks.snapshot(); return c >= 1 })
	if _, err := q.Enqueue(context.Background(), queue.NewJob{Queue: "wake"}); err != nil {
		t.Fatal(err)
	}
	wd.wake <- struct{}{}
	waitFor(t, "the woken worker to run the job", func() bool { return w.Stats().Completed == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if wd.subscribed.Load() != 1 || wd.stopped.Load() != 1 || wd.subscribedTo.Load() != "wake" {
		t.Errorf("subscribed %d times to %v, stopped %d: want once to \"wake\", stopped once",
			wd.subscribed.Load(), wd.subscribedTo.Load(), wd.stopped.Load())
	}

	off := &wakingDriver{spyDriver: &spyDriver{Driver: memq.New(time.Minute).Driver()}, wake: make(chan struct{}, 1)}
	q2, _ := queue.New(off, queue.Config{})
	w2, _ := queue.NewWorker(q2, func(context.Context, *queue.Job) error { return nil },
		queue.WorkerConfig{Queue: "wake", PollInterval: 5 * time.Millisecond, DisableWakeups: true})
	if _, err := q2.Enqueue(context.Background(), queue.NewJob{Queue: "wake"}); err != nil {
		t.Fatal(err)
	}
	stop2 := runWorker(t, w2)
	waitFor(t, "the polling worker to run the job", func() bool { return w2.Stats().Completed == 1 })
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
	if n := off.subscribed.Load(); n != 0 {
		t.Errorf("DisableWakeups: subscribed %d times", n)
	}
}

// A driver that closes its wake channel (its listener died) leaves the
// worker polling.
func TestWorkerSurvivesClosedWakeChannel(t *testing.T) {
	wd := &wakingDriver{spyDriver: &spyDriver{Driver: memq.New(time.Minute).Driver()}, wake: make(chan struct{})}
	close(wd.wake)
	q, _ := queue.New(wd, queue.Config{})
	hooks := newRecHooks()
	w, _ := queue.NewWorker(q, func(context.Context, *queue.Job) error { return nil },
		queue.WorkerConfig{Queue: "w", PollInterval: 10 * time.Millisecond, Hooks: hooks})
	stop := runWorker(t, w)
	waitFor(t, "a claim", func() bool { c, _, _ := hooks.snapshot(); return c >= 1 })
	if _, err := q.Enqueue(context.Background(), queue.NewJob{Queue: "w"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the polling worker to run the job", func() bool { return w.Stats().Completed == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A run cut off by shutdown is released, and the hooks say so.
func TestWorkerHooksReleased(t *testing.T) {
	q, _ := queue.New(memq.New(time.Minute).Driver(), queue.Config{})
	if _, err := q.Enqueue(context.Background(), queue.NewJob{Queue: "r"}); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	hooks := newRecHooks()
	w, _ := queue.NewWorker(q, func(ctx context.Context, _ *queue.Job) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}, queue.WorkerConfig{Queue: "r", ShutdownTimeout: time.Millisecond, Hooks: hooks})
	stop := runWorker(t, w)
	<-started
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, _, o := hooks.snapshot(); o[queue.OutcomeReleased] != 1 || len(o) != 1 {
		t.Errorf("outcomes %v, want one released", o)
	}
	if st, _ := q.Stats(context.Background()); len(st) != 1 || st[0].Ready != 1 {
		t.Errorf("queue after shutdown %+v, want the job ready again", st)
	}
}

func TestOutcomeString(t *testing.T) {
	want := []string{"completed", "retried", "dead", "snoozed", "released", "lease_lost", "unrecorded"}
	for i, o := range queue.Outcomes() {
		if o.String() != want[i] {
			t.Errorf("Outcome(%d) = %q, want %q", i, o, want[i])
		}
	}
	if s := queue.Outcome(99).String(); s != "unknown" {
		t.Errorf("Outcome(99) = %q", s)
	}
}

// flakyClaimer fails Complete with a transient error until failUntil, and
// records which leases each Extend renewed, and when.
type flakyClaimer struct {
	queue.Claimer
	failUntil atomic.Int64 // unix ns
	mu        sync.Mutex
	extends   map[int64][]time.Time
}

func (c *flakyClaimer) Complete(ctx context.Context, ls []queue.Lease) error {
	if time.Now().UnixNano() < c.failUntil.Load() {
		return errors.New("connection refused (server restarting)")
	}
	return c.Claimer.Complete(ctx, ls)
}

func (c *flakyClaimer) Extend(ctx context.Context, ls []queue.Lease) error {
	c.mu.Lock()
	for _, l := range ls {
		c.extends[l.ID] = append(c.extends[l.ID], time.Now())
	}
	c.mu.Unlock()
	return c.Claimer.Extend(ctx, ls)
}

// wrapDriver hands out the claimers of Driver wrapped by wrap.
type wrapDriver struct {
	queue.Driver
	wrap func(queue.Claimer) queue.Claimer
}

func (d *wrapDriver) NewClaimer(ctx context.Context) (queue.Claimer, error) {
	c, err := d.Driver.NewClaimer(ctx)
	if err != nil {
		return nil, err
	}
	return d.wrap(c), nil
}

// A result whose write fails for a while (a database restart) is retried
// for longer than a few tries, and the job's lease is renewed until the
// write lands, so it completes once and is never taken back.
func TestWorkerKeepsLeaseUntilResultWritten(t *testing.T) {
	const lease = 300 * time.Millisecond
	fc := &flakyClaimer{extends: map[int64][]time.Time{}}
	d := &wrapDriver{Driver: memq.New(lease).Driver(), wrap: func(c queue.Claimer) queue.Claimer { fc.Claimer = c; return fc }}
	q, _ := queue.New(d, queue.Config{})
	ctx := context.Background()
	ids, err := q.Enqueue(ctx, queue.NewJob{Queue: "w"})
	if err != nil {
		t.Fatal(err)
	}
	var returned atomic.Int64
	w, err := queue.NewWorker(q, func(context.Context, *queue.Job) error {
		fc.failUntil.CompareAndSwap(0, time.Now().Add(2500*time.Millisecond).UnixNano())
		returned.Store(time.Now().UnixNano())
		return nil
	}, queue.WorkerConfig{Queue: "w", PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	waitFor(t, "the job to complete", func() bool { return w.Stats().Completed+w.Stats().LeasesLost > 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Completed != 1 || st.LeasesLost != 0 || st.Claimed != 1 {
		t.Fatalf("stats %+v: want 1 claimed, 1 completed, no lease lost", st)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	after := 0
	for _, at := range fc.extends[ids[0]] {
		if at.UnixNano() > returned.Load() {
			after++
		}
	}
	if after < 3 {
		t.Fatalf("the lease was renewed %d times after the handler returned, want it renewed while the write was retried", after)
	}
}

// stuckExtendClaimer's first Extend hangs until its context ends, as one on
// a dead connection or behind a lock would; it counts the Extends that
// renewed leases afterwards.
type stuckExtendClaimer struct {
	queue.Claimer
	calls, renewed atomic.Int32
	deadline       atomic.Bool // the stuck call had a deadline
}

func (c *stuckExtendClaimer) Extend(ctx context.Context, ls []queue.Lease) error {
	if c.calls.Add(1) == 1 {
		_, ok := ctx.Deadline()
		c.deadline.Store(ok)
		<-ctx.Done()
		return ctx.Err()
	}
	err := c.Claimer.Extend(ctx, ls)
	if err == nil {
		c.renewed.Add(1)
	}
	return err
}

// A heartbeat whose Extend hangs is cut off after one interval and tried
// again at once, so one stuck call does not stop the renewals that keep a
// running job's lease.
func TestWorkerHeartbeatOutlivesStuckExtend(t *testing.T) {
	const lease = 300 * time.Millisecond
	sc := &stuckExtendClaimer{}
	d := &wrapDriver{Driver: memq.New(lease).Driver(), wrap: func(c queue.Claimer) queue.Claimer { sc.Claimer = c; return sc }}
	q, _ := queue.New(d, queue.Config{})
	if _, err := q.Enqueue(context.Background(), queue.NewJob{Queue: "w"}); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var renewedWhileRunning atomic.Int32
	w, err := queue.NewWorker(q, func(context.Context, *queue.Job) error {
		<-release
		renewedWhileRunning.Store(sc.renewed.Load())
		return nil
	}, queue.WorkerConfig{Queue: "w", PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	waitFor(t, "two renewals after the stuck Extend", func() bool { return sc.renewed.Load() >= 2 })
	close(release)
	waitFor(t, "the job to complete", func() bool { return w.Stats().Completed+w.Stats().LeasesLost > 0 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !sc.deadline.Load() {
		t.Error("the heartbeat's Extend had no deadline")
	}
	if st := w.Stats(); st.Completed != 1 || st.LeasesLost != 0 {
		t.Fatalf("stats %+v: want 1 completed, no lease lost", st)
	}
	if n := renewedWhileRunning.Load(); n < 2 {
		t.Fatalf("%d renewals while the handler ran, want at least 2", n)
	}
}

// countingClaimer records the most Claims it saw running at once.
type countingClaimer struct {
	queue.Claimer
	now, peak *atomic.Int32
}

func (c *countingClaimer) Claim(ctx context.Context, name string, n int) ([]*queue.Job, error) {
	cur := c.now.Add(1)
	defer c.now.Add(-1)
	for {
		p := c.peak.Load()
		if cur <= p || c.peak.CompareAndSwap(p, cur) {
			break
		}
	}
	time.Sleep(2 * time.Millisecond) // long enough for claims to overlap
	return c.Claimer.Claim(ctx, name, n)
}

// Workers of one Queue run at most Config.ClaimConcurrency claims on a
// queue name at once, and no fewer when they can; -1 lifts the limit.
func TestWorkersShareClaimConcurrency(t *testing.T) {
	for _, tc := range []struct{ limit, want int32 }{{1, 1}, {3, 3}, {-1, 8}} {
		var now, peak atomic.Int32
		d := &wrapDriver{Driver: memq.New(time.Minute).Driver(), wrap: func(c queue.Claimer) queue.Claimer {
			return &countingClaimer{Claimer: c, now: &now, peak: &peak}
		}}
		q, err := queue.New(d, queue.Config{ClaimConcurrency: int(tc.limit)})
		if err != nil {
			t.Fatal(err)
		}
		var stops []func() error
		for range 8 {
			// An empty queue: every worker keeps claiming, polling at once.
			w, err := queue.NewWorker(q, func(context.Context, *queue.Job) error { return nil },
				queue.WorkerConfig{Queue: "c", PollInterval: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			stops = append(stops, runWorker(t, w))
		}
		waitFor(t, "claims to overlap", func() bool { return peak.Load() >= tc.want })
		time.Sleep(50 * time.Millisecond)
		for _, stop := range stops {
			if err := stop(); err != nil {
				t.Fatal(err)
			}
		}
		if got := peak.Load(); got != tc.want {
			t.Errorf("ClaimConcurrency %d: up to %d claims at once, want %d", tc.limit, got, tc.want)
		}
	}
	if _, err := queue.New(memq.New(time.Minute).Driver(), queue.Config{ClaimConcurrency: -2}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("ClaimConcurrency -2: %v, want ErrInvalidConfig", err)
	}
}

// poolStarvedClaimer's writes wait for a pool connection that never comes
// free, as database/sql and pgxpool do: until their context ends.
type poolStarvedClaimer struct {
	queue.Claimer
	waits    atomic.Int32
	deadline atomic.Bool // every wait had a deadline
}

func (c *poolStarvedClaimer) wait(ctx context.Context) error {
	c.waits.Add(1)
	if _, ok := ctx.Deadline(); !ok {
		c.deadline.Store(false)
	}
	<-ctx.Done()
	return fmt.Errorf("dbq: acquire connection: %w", ctx.Err())
}

func (c *poolStarvedClaimer) Complete(ctx context.Context, _ []queue.Lease) error { return c.wait(ctx) }
func (c *poolStarvedClaimer) Retry(ctx context.Context, _ []queue.RetryParams) error {
	return c.wait(ctx)
}
func (c *poolStarvedClaimer) Release(ctx context.Context, _ []queue.Lease) error { return c.wait(ctx) }

// A Worker whose result writes cannot get a connection (a pool too small
// for the claimer and its writes) still returns after shutdown, within
// ShutdownTimeout plus the bounded flush, and every wait had a deadline.
func TestWorkerShutdownBoundedWhenWritesCannotConnect(t *testing.T) {
	sc := &poolStarvedClaimer{}
	sc.deadline.Store(true)
	d := &wrapDriver{Driver: memq.New(time.Minute).Driver(), wrap: func(c queue.Claimer) queue.Claimer { sc.Claimer = c; return sc }}
	q, _ := queue.New(d, queue.Config{})
	if _, err := q.Enqueue(context.Background(), queue.NewJob{Queue: "w"}); err != nil {
		t.Fatal(err)
	}
	w, err := queue.NewWorker(q, func(context.Context, *queue.Job) error { return nil },
		queue.WorkerConfig{Queue: "w", PollInterval: 20 * time.Millisecond, ShutdownTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	waitFor(t, "a result write to wait for a connection", func() bool { return sc.waits.Load() > 0 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after its context ended while a write waited for a connection")
	}
	if !sc.deadline.Load() {
		t.Error("a result write waited with no deadline")
	}
	if st := w.Stats(); st.Completed != 0 {
		t.Errorf("stats %+v: no write could land, yet a completion was counted", st)
	}
}

// reclaimingClaimer's first Claim hands out the job; its next claims hand
// out the same job again under a new token, as a lock claimer that lost its
// connection (and so the job's lock) and claimed on a new one does.
type reclaimingClaimer struct {
	queue.Claimer
	claims atomic.Int32
}

func (c *reclaimingClaimer) Claim(ctx context.Context, name string, n int) ([]*queue.Job, error) {
	if c.claims.Add(1) > 2 {
		return nil, nil
	}
	return []*queue.Job{{ID: 7, Queue: name, Token: int64(c.claims.Load()), MaxAttempts: 3, State: queue.StateClaimed}}, nil
}

func (c *reclaimingClaimer) Complete(context.Context, []queue.Lease) error { return nil }

// A job claimed again while its earlier run still goes on (the earlier
// claim was lost before the heartbeat noticed) cancels the earlier run
// with a lease-lost cause, so one worker never runs it twice at once.
func TestWorkerReclaimedJobCancelsEarlierRun(t *testing.T) {
	rc := &reclaimingClaimer{}
	d := &wrapDriver{Driver: memq.New(time.Minute).Driver(), wrap: func(c queue.Claimer) queue.Claimer { rc.Claimer = c; return rc }}
	q, _ := queue.New(d, queue.Config{})
	causes := make(chan error, 2)
	var runs atomic.Int32
	w, err := queue.NewWorker(q, func(ctx context.Context, j *queue.Job) error {
		if runs.Add(1) > 1 {
			return nil
		}
		select {
		case <-ctx.Done():
			causes <- context.Cause(ctx)
		case <-time.After(10 * time.Second):
			causes <- nil
		}
		return ctx.Err()
	}, queue.WorkerConfig{Queue: "w", Concurrency: 2, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	if cause := <-causes; !errors.Is(cause, queue.ErrLeaseLost) {
		t.Fatalf("earlier run ended with cause %v, want one matching ErrLeaseLost", cause)
	}
	waitFor(t, "both runs to settle", func() bool { st := w.Stats(); return st.Completed+st.LeasesLost == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Completed != 1 || st.LeasesLost != 1 {
		t.Fatalf("stats %+v: want the later run completed and the earlier one lost", st)
	}
}

// StopNow during a graceful shutdown cancels the running handlers at once
// rather than after ShutdownTimeout, and their jobs are released with no
// attempt spent.
func TestWorkerStopNow(t *testing.T) {
	q, _ := queue.New(memq.New(time.Minute).Driver(), queue.Config{})
	if _, err := q.Enqueue(context.Background(), queue.NewJob{Queue: "w"}, queue.NewJob{Queue: "w"}); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 2)
	w, err := queue.NewWorker(q, func(ctx context.Context, j *queue.Job) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}, queue.WorkerConfig{Queue: "w", PollInterval: 20 * time.Millisecond, ShutdownTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	w.StopNow() // not running: nothing happens
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	<-started
	<-started
	cancel() // graceful: the handlers could run for an hour
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) before StopNow, with handlers running and an hour to go", err)
	case <-time.After(100 * time.Millisecond):
	}
	w.StopNow()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after StopNow")
	}
	if st := w.Stats(); st.Released != 2 || st.Retried != 0 {
		t.Fatalf("stats %+v: want both jobs released, none retried", st)
	}
	jobs, err := q.Jobs(context.Background(), queue.JobFilter{Queue: "w"})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Attempt != 0 || j.State != queue.StateReady {
			t.Errorf("job %d: attempt %d, state %s; want ready at attempt 0", j.ID, j.Attempt, j.State)
		}
	}
}

// lateLostClaimer hands out job 7 under token 1, then under token 2 (the
// first claim was lost and the job claimed again). An Extend that carries
// token 1 waits until the second claim, then reports job 7 lost: the
// heartbeat read the first claim's lease before the job was claimed again.
type lateLostClaimer struct {
	queue.Claimer
	claims   atomic.Int32
	reclaim  chan struct{}
	reading  chan struct{} // closed once an Extend holds token 1
	once     sync.Once
	released atomic.Int32
}

func (c *lateLostClaimer) Heartbeat() time.Duration { return 10 * time.Millisecond }

func (c *lateLostClaimer) Claim(ctx context.Context, name string, n int) ([]*queue.Job, error) {
	k := c.claims.Add(1)
	if k > 2 {
		return nil, nil
	}
	if k == 2 {
		select { // claim again only once the heartbeat has read token 1
		case <-c.reading:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		close(c.reclaim)
	}
	return []*queue.Job{{ID: 7, Queue: name, Token: int64(k), MaxAttempts: 3, State: queue.StateClaimed}}, nil
}

func (c *lateLostClaimer) Extend(ctx context.Context, ls []queue.Lease) error {
	for _, l := range ls {
		if l.Token == 1 {
			c.once.Do(func() { close(c.reading) })
			select {
			case <-c.reclaim:
			case <-ctx.Done():
				return ctx.Err()
			}
			time.Sleep(5 * time.Millisecond) // the second run is in flight
			return &queue.LeaseLostError{IDs: []int64{7}}
		}
	}
	return nil
}

func (c *lateLostClaimer) Complete(context.Context, []queue.Lease) error { return nil }
func (c *lateLostClaimer) Release(_ context.Context, ls []queue.Lease) error {
	c.released.Add(int32(len(ls)))
	return nil
}

// A heartbeat's report that an earlier claim of a job was lost cancels the
// run of that claim only, not the run of the job's later claim, and the
// lost run's claim is given back.
func TestWorkerLostLeaseMatchesToken(t *testing.T) {
	lc := &lateLostClaimer{reclaim: make(chan struct{}), reading: make(chan struct{})}
	d := &wrapDriver{Driver: memq.New(time.Minute).Driver(), wrap: func(c queue.Claimer) queue.Claimer { lc.Claimer = c; return lc }}
	q, _ := queue.New(d, queue.Config{})
	var runs atomic.Int32
	w, err := queue.NewWorker(q, func(ctx context.Context, j *queue.Job) error {
		if runs.Add(1) == 1 {
			<-ctx.Done()
			return ctx.Err()
		}
		time.Sleep(100 * time.Millisecond) // across the late report
		return ctx.Err()
	}, queue.WorkerConfig{Queue: "w", Concurrency: 2, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stop := runWorker(t, w)
	waitFor(t, "both runs to settle", func() bool { st := w.Stats(); return st.Completed+st.LeasesLost == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Completed != 1 || st.LeasesLost != 1 {
		t.Fatalf("stats %+v: want the later claim's run completed, the earlier one lost", st)
	}
	if lc.released.Load() == 0 {
		t.Error("the lost run's claim was not given back")
	}
}

// blockingClaimer's claims wait until their context ends, as one waiting
// for a pool connection or a slow server does.
type blockingClaimer struct {
	queue.Claimer
	waiting atomic.Int32
}

func (c *blockingClaimer) Claim(ctx context.Context, _ string, _ int) ([]*queue.Job, error) {
	c.waiting.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// errHooks counts the claim errors a Worker reports.
type errHooks struct {
	queue.NopHooks
	errs atomic.Int32
}

func (h *errHooks) ClaimDone(_ string, _, _ int, _ time.Duration, err error) {
	if err != nil {
		h.errs.Add(1)
	}
}

// A claim cut short by the Worker's shutdown is no claim error: hooks (and
// so dbq_claim_errors_total) do not count it, nor do the Worker's stats.
func TestWorkerShutdownDuringClaimIsNoError(t *testing.T) {
	bc := &blockingClaimer{}
	d := &wrapDriver{Driver: memq.New(time.Minute).Driver(), wrap: func(c queue.Claimer) queue.Claimer { bc.Claimer = c; return bc }}
	q, _ := queue.New(d, queue.Config{})
	h := &errHooks{}
	w, err := queue.NewWorker(q, func(context.Context, *queue.Job) error { return nil },
		queue.WorkerConfig{Queue: "w", PollInterval: 20 * time.Millisecond, Hooks: h})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	waitFor(t, "a claim to wait", func() bool { return bc.waiting.Load() > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := h.errs.Load(); n != 0 {
		t.Errorf("hooks saw %d claim errors from a claim cut short by shutdown, want 0", n)
	}
	if st := w.Stats(); st.ClaimErrors != 0 {
		t.Errorf("stats %+v: a claim cut short by shutdown counted as an error", st)
	}
}
