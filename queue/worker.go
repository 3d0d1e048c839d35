package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbq/dialect"
)

// Handler runs one job. A nil error completes the job; an error retries it
// with backoff, or makes it dead once its attempts are spent or when the
// error is wrapped by Permanent; an error from Snooze runs it again later
// without spending an attempt. A panic counts as an error. ctx is
// cancelled when the worker hard-stops or the job's claim is lost (its
// lease expired, or the connection holding its lock ended); then
// context.Cause(ctx) matches ErrLeaseLost.
type Handler func(ctx context.Context, job *Job) error

// Permanent wraps err so that the job fails for good: it is made dead at
// once, whatever attempts it has left.
func Permanent(err error) error { return &permanentError{err} }

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// WorkerConfig tunes a Worker. The zero value of each optional field means
// the default it documents.
type WorkerConfig struct {
	// Queue is the queue to work. Required.
	Queue string
	// Concurrency is how many handlers run at once. Default 10.
	Concurrency int
	// BatchSize caps the jobs one claim takes. Default Concurrency, at
	// most 1000. A Worker claims for the handler slots free when it
	// claims; when they make less than half a batch it first waits up to
	// 1 ms for more to free, so that busy handlers finishing one by one do
	// not each cost a claim.
	BatchSize int
	// PollInterval is the pause after a claim that found less than it asked
	// for, with ±20% jitter. A claim that filled its batch is followed by
	// the next at once. Default 1s.
	PollInterval time.Duration
	// DisableWakeups makes the worker only poll. By default, when the
	// Queue's driver is a [Waker] (PostgreSQL with LISTEN/NOTIFY), an
	// enqueue on the worker's queue cuts its poll wait short, so pickup
	// latency is not the poll interval.
	DisableWakeups bool
	// ExitWhenEmpty makes Run drain the queue and return nil: once a claim
	// finds no job due while none of the Worker's claimed jobs is still
	// running or waiting for its result to be written (a running job may
	// enqueue more), it shuts down as when its context ends, with nothing
	// left to finish. Jobs due later stay, retries waiting out their
	// backoff among them, and so does a paused queue's backlog. For batch
	// runs and tests. Default false: run until the context ends.
	ExitWhenEmpty bool
	// ShutdownTimeout is how long in-flight handlers may run on after Run's
	// context is cancelled; then their contexts are cancelled and their jobs
	// released. Writing the last results and closing the claimer get at
	// most 5s each on top, whatever the database or the pool does, so Run
	// returns at most ShutdownTimeout + 10s after its context ends. Default
	// 30s.
	ShutdownTimeout time.Duration
	// Backoff gives the delay before a failed job's next run. Default
	// DefaultBackoff.
	Backoff Backoff
	// Logger defaults to the Queue's logger.
	Logger *slog.Logger
	// Hooks observe claims and runs, for metrics and tracing. Default
	// none, which costs nothing per job.
	Hooks Hooks
	// Activity, when set, counts the jobs this Worker completes, retries
	// and makes dead, for the activity table, and lists its queue and
	// concurrency in the process row while it runs. One Activity serves
	// every Worker of a process; see [Activity]. Default none.
	Activity *Activity
}

// Worker claims jobs from one queue and runs them with a Handler on
// Concurrency goroutines. Completions and failures are written in batches;
// when the claimer is a [CompleteClaimer], the completions that wait while
// the Worker is about to claim go with its next claim, in one round trip.
// For lease-based claimers it renews every held job's lease each third of
// the lease; for lock-based ones ([LockCheck]) it checks the lock
// connection each interval. It cancels the handler of a job whose claim was
// lost, with a cause matching ErrLeaseLost.
type Worker struct {
	q       *Queue
	handler Handler
	cfg     WorkerConfig
	log     *slog.Logger

	hooks Hooks // nil when the config has none: no calls, no timing

	running atomic.Bool
	stats   workerCounters

	stopMu  sync.Mutex
	stopNow func() // ends the current Run at once; nil between Runs
}

type workerCounters struct {
	claimed, completed, retried, dead, snoozed, released, lost, panics, claimErrors atomic.Int64
}

// WorkerStats counts what a Worker has done since it was made. Retried
// counts every failure written, Dead those of them that made the job dead;
// Snoozed counts runs ended by Snooze, which are not failures.
type WorkerStats struct {
	Claimed, Completed, Retried, Released, LeasesLost, Panics, ClaimErrors int64
	Dead, Snoozed                                                          int64
}

// NewWorker returns a Worker for q. It validates cfg.
func NewWorker(q *Queue, h Handler, cfg WorkerConfig) (*Worker, error) {
	if q == nil || h == nil {
		return nil, fmt.Errorf("%w: NewWorker needs a queue and a handler", ErrInvalidConfig)
	}
	if err := dialect.ValidateQueue(cfg.Queue); err != nil {
		return nil, err
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 10
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = min(cfg.Concurrency, 1000)
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Logger == nil {
		cfg.Logger = q.cfg.Logger
	}
	switch {
	case cfg.Concurrency < 1:
		return nil, fmt.Errorf("%w: Concurrency %d < 1", ErrInvalidConfig, cfg.Concurrency)
	case cfg.BatchSize < 1 || cfg.BatchSize > 1000:
		return nil, fmt.Errorf("%w: BatchSize %d not in 1..1000", ErrInvalidConfig, cfg.BatchSize)
	case cfg.PollInterval < 0 || cfg.ShutdownTimeout < 0:
		return nil, fmt.Errorf("%w: negative PollInterval or ShutdownTimeout", ErrInvalidConfig)
	}
	return &Worker{q: q, handler: h, cfg: cfg, log: cfg.Logger.With("queue", cfg.Queue), hooks: cfg.Hooks}, nil
}

// Stats returns the worker's counters.
func (w *Worker) Stats() WorkerStats {
	c := &w.stats
	return WorkerStats{
		Claimed: c.claimed.Load(), Completed: c.completed.Load(), Retried: c.retried.Load(),
		Released: c.released.Load(), LeasesLost: c.lost.Load(), Panics: c.panics.Load(),
		ClaimErrors: c.claimErrors.Load(), Dead: c.dead.Load(), Snoozed: c.snoozed.Load(),
	}
}

// outcome is what became of one job.
type outcome int

const (
	done outcome = iota
	failed
	snoozed
	released
	lost
	nOutcomes
)

type result struct {
	job   *Job
	out   outcome
	err   error // the handler's
	perm  bool
	delay time.Duration
	// written is set on a done result whose completion a claim already
	// wrote (CompleteClaimer): the result writer only accounts for it.
	written bool
	// For Hooks only: the context JobStart returned and the run time.
	ctx  context.Context
	took time.Duration
}

// dead reports whether a failed result makes its job dead, as the dialects'
// retry statements decide it.
func (r *result) dead() bool { return r.perm || r.job.Attempt+1 >= r.job.MaxAttempts }

type running struct {
	job    *Job
	cancel context.CancelCauseFunc
	// returned is set once the handler has returned: a claim lost after
	// that is the result write's to report (its Complete or Retry finds
	// it lost), and a heartbeat that raced with the write (it read the
	// lease before the write ended the claim) reports nothing.
	returned atomic.Bool
}

// claimTimeout bounds one claim.
const claimTimeout = 30 * time.Second

// writeRetryFor is how long a worker retries writing a batch of results
// (complete, retry, release) that fails with a transient error; each try
// gets at most writeTimeout, so a write stuck waiting for a pool
// connection or a server answer ends too.
const (
	writeRetryFor = 15 * time.Second
	writeTimeout  = 10 * time.Second
)

// flushTimeout bounds, after shutdown, the writing of the last results
// and then the claimer's Close.
const flushTimeout = 5 * time.Second

var errShutdown = errors.New("dbq: worker shut down")

// errLeaseLostCause is the cause of a handler's ctx when its job's claim
// was lost; it matches ErrLeaseLost.
var errLeaseLostCause = fmt.Errorf("%w: the job's claim ended while its handler ran", ErrLeaseLost)

// Run works the queue until ctx is cancelled, then shuts down gracefully:
// it stops claiming, lets running handlers finish within ShutdownTimeout,
// cancels and releases the rest, flushes every result and closes its
// claimer. It returns nil after a graceful shutdown, or the error that kept
// it from starting or made it stop (ErrClosed, ErrNotMigrated,
// ErrUnsupportedServer from a claim). A Worker runs once at a time.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: worker already running", ErrInvalidConfig)
	}
	defer w.running.Store(false)
	ctx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()

	claimer, err := w.q.NewClaimer(ctx)
	if err != nil {
		return err
	}
	// Subscribe before the first claim, so that no enqueue falls between
	// a claim that missed it and the wait that follows.
	var wake <-chan struct{}
	if wk, ok := w.q.drv.(Waker); ok && !w.cfg.DisableWakeups {
		var unsubscribe func()
		wake, unsubscribe = wk.Subscribe(w.cfg.Queue)
		defer unsubscribe()
	}
	w.log.Debug("dbq: worker started", "concurrency", w.cfg.Concurrency, "batch", w.cfg.BatchSize,
		"poll", w.cfg.PollInterval, "wakeups", wake != nil)
	defer w.log.Debug("dbq: worker stopped")

	if w.cfg.Activity != nil {
		defer w.cfg.Activity.join(w)()
	}
	r := w.begin(ctx, claimer)
	w.setStopNow(func() { r.abortOnce.Do(func() { close(r.abort); cancelRun() }) })
	defer w.setStopNow(nil)
	return r.stop(ctx, r.claimLoop(ctx, wake))
}

// runState is one Run's: its claimer, the jobs in flight, and the
// goroutines that run, renew and settle them.
type runState struct {
	w       *Worker
	claimer Claimer

	inflight inflight
	handlers sync.WaitGroup
	slots    chan struct{} // a token per free handler slot
	results  chan result
	flushed  chan struct{} // closed once complete wrote the last result
	// With a CompleteClaimer, completed runs wait in pending for the next
	// claim to write them, while the claim loop is claiming; the results
	// they end as reach the result writer through handoffs.
	pending  *pending // nil without a CompleteClaimer
	handoffs chan handoff

	// Handlers run on hardCtx, which outlives Run's ctx by ShutdownTimeout;
	// result writes on writeCtx, which ends flushTimeout after that.
	hardStop  context.CancelCauseFunc
	hardCtx   context.Context
	writeStop context.CancelFunc

	hbStop context.CancelFunc
	hbDone chan struct{} // nil when the claimer needs no heartbeat

	abort     chan struct{} // closed by StopNow
	abortOnce sync.Once
}

// begin starts a Run's result writer and heartbeat.
func (w *Worker) begin(ctx context.Context, claimer Claimer) *runState {
	r := &runState{
		w: w, claimer: claimer,
		inflight: inflight{m: map[int64]*running{}},
		slots:    make(chan struct{}, w.cfg.Concurrency),
		results:  make(chan result, w.cfg.Concurrency),
		flushed:  make(chan struct{}),
		handoffs: make(chan handoff),
		abort:    make(chan struct{}),
	}
	if _, ok := claimer.(CompleteClaimer); ok {
		r.pending = &pending{}
	}
	for range w.cfg.Concurrency {
		r.slots <- struct{}{}
	}
	r.hardCtx, r.hardStop = context.WithCancelCause(context.WithoutCancel(ctx))
	writeCtx, writeStop := context.WithCancel(context.WithoutCancel(ctx))
	r.writeStop = writeStop
	go func() {
		defer close(r.flushed)
		w.complete(writeCtx, claimer, r.results, r.handoffs, r.inflight.settle)
	}()
	// Claims are renewed (or their connection checked) until the last
	// handler returns, past ctx.
	hbCtx, hbStop := context.WithCancel(r.hardCtx)
	r.hbStop = hbStop
	if every := heartbeatInterval(claimer); every > 0 {
		r.hbDone = make(chan struct{})
		go func() {
			defer close(r.hbDone)
			w.heartbeat(hbCtx, claimer, every, r.inflight.leases, r.inflight.lost)
		}()
	}
	return r
}

// claimLoop claims whenever handler slots are free until ctx ends (nil),
// a claim finds the queue drained under ExitWhenEmpty (nil), or a claim
// fails in a way retrying cannot mend (that error).
func (r *runState) claimLoop(ctx context.Context, wake <-chan struct{}) error {
	w := r.w
	claimSlot := w.q.claimSlot(w.cfg.Queue)
	backoff := time.Duration(0)
	// Completions wait for a claim only while the loop is about to claim;
	// before it waits for anything else they go to the result writer.
	defer func() { r.handOver(handoff{results: r.pending.close()}) }()
	for {
		r.pending.open()
		// Wait for a free slot, then for this queue's turn to claim
		// (Config.ClaimConcurrency); slots freed meanwhile join the batch.
		select {
		case <-ctx.Done():
			return nil
		case <-r.slots:
		}
		if claimSlot != nil {
			select {
			case <-ctx.Done():
				return nil
			case claimSlot <- struct{}{}:
			}
		}
		free := r.gather(1)
		jobs, wrote, err := r.claim(ctx, free)
		if len(jobs) > free {
			jobs = r.giveBack(ctx, jobs, free)
		}
		if claimSlot != nil {
			<-claimSlot
		}
		for range free - len(jobs) {
			r.slots <- struct{}{}
		}
		if err != nil {
			r.handOver(wrote)
		}
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrClosed) || errors.Is(err, ErrNotMigrated) || errors.Is(err, ErrUnsupportedServer):
			return err
		case err != nil:
			w.stats.claimErrors.Add(1)
			r.handOver(handoff{results: r.pending.close()})
			backoff = min(max(2*backoff, 100*time.Millisecond), 30*time.Second)
			w.log.Warn("dbq: claim failed; retrying", "err", err, "in", backoff)
			if !sleep(ctx, Jitter(backoff, 0.5)) {
				return nil
			}
			continue
		}
		backoff = 0
		w.stats.claimed.Add(int64(len(jobs)))
		for _, j := range jobs {
			r.start(j)
		}
		// After the jobs are in flight, whose claims the heartbeat then
		// renews: the result writer may keep this waiting.
		r.handOver(wrote)
		// Drained: nothing due, and every job claimed has its result
		// written (results handed over just now are still in flight).
		if len(jobs) == 0 && w.cfg.ExitWhenEmpty && r.inflight.empty() {
			return nil
		}
		// A full batch suggests more are ready: claim again at once.
		if len(jobs) < free {
			r.handOver(handoff{results: r.pending.close()})
			if !w.idle(ctx, Jitter(w.cfg.PollInterval, 0.2), &wake) {
				return nil
			}
		}
	}
}

// giveBack keeps the first n of jobs, which a claim of n returned more
// than n of, and releases the rest: a claimer that breaks the Claimer
// contract so must not start more handlers than the Worker has slots
// (the slot count would overflow and the claim loop stop for good).
func (r *runState) giveBack(ctx context.Context, jobs []*Job, n int) []*Job {
	extra := jobs[n:]
	r.w.log.Error("dbq: the claimer returned more jobs than it was asked for; giving the rest back",
		"queue", r.w.cfg.Queue, "asked", n, "got", len(jobs))
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	defer cancel()
	if err := r.claimer.Release(rctx, Leases(extra)); err != nil {
		r.w.log.Warn("dbq: giving back jobs failed; they return when their claims expire", "jobs", len(extra), "err", err)
	}
	return jobs[:n]
}

// gatherWait is how long a claim that would take fewer than half a batch
// waits for more handler slots to free. Busy handlers free their slots one
// by one; claiming for each as it comes made claims of a few jobs, each
// costing the round trips and the commit of a full one (MySQL drains
// claimed 57 jobs a claim on average with BatchSize 100, 92 with the
// wait). A job waits at most this much longer to be claimed, and only
// while the Worker is busy.
var gatherWait = time.Millisecond // a variable for tests

// gather adds the handler slots free now to free, up to a batch, and when
// they make less than half a batch, those freed within gatherWait.
func (r *runState) gather(free int) int {
	batch := r.w.cfg.BatchSize
	for free < batch {
		select {
		case <-r.slots:
			free++
			continue
		default:
		}
		break
	}
	if free >= batch/2 {
		return free
	}
	t := time.NewTimer(gatherWait)
	defer t.Stop()
	for free < batch {
		select {
		case <-r.slots:
			free++
		case <-t.C:
			return free
		}
	}
	return free
}

// claim runs one claim of up to n jobs. Shutdown cuts it short (one
// waiting for a pool connection would otherwise hold Run up): the contract
// says a cancelled claim leaves no lock and no claim behind, and a lock
// claimer keeps the locks of the jobs still running.
//
// With a CompleteClaimer, the completions waiting in pending go with the
// claim; their results are returned for the result writer (handOver),
// marked written unless their write failed (it then writes them as any
// other).
func (r *runState) claim(ctx context.Context, n int) ([]*Job, handoff, error) {
	w := r.w
	cctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	var began time.Time
	if w.hooks != nil {
		began = time.Now()
	}
	var (
		jobs  []*Job
		err   error
		wrote handoff
	)
	if done := r.pending.take(); len(done) > 0 {
		leases := make([]Lease, len(done))
		for i := range done {
			leases[i] = done[i].job.Lease()
		}
		res := r.claimer.(CompleteClaimer).CompleteClaim(cctx, CompleteClaimParams{Complete: leases, Queue: w.cfg.Queue, N: n})
		jobs, err = res.Jobs, res.ClaimErr
		wrote.results = done
		var lost *LeaseLostError
		switch {
		case res.CompleteErr == nil:
			wrote.written = true
		case errors.As(res.CompleteErr, &lost):
			wrote.written, wrote.lost = true, lost.IDs
		default:
			w.log.Debug("dbq: completing with a claim failed; writing the completions alone", "jobs", len(done), "err", res.CompleteErr)
		}
	} else {
		jobs, err = r.claimer.Claim(cctx, w.cfg.Queue, n)
	}
	// A claim cut short by shutdown is neither a claim nor a failure.
	if w.hooks != nil && (err == nil || ctx.Err() == nil) {
		w.hooks.ClaimDone(w.cfg.Queue, n, len(jobs), time.Since(began), err)
	}
	return jobs, wrote, err
}

// handOver gives results taken from pending to the result writer. It
// waits for the writer, as a handler does.
func (r *runState) handOver(h handoff) {
	if len(h.results) == 0 {
		return
	}
	for i := range h.results {
		h.results[i].written = h.written
	}
	r.handoffs <- h
}

// handoff is results taken from pending, for the result writer: written
// when a claim wrote their completions, with the ids among them whose
// leases it found lost.
type handoff struct {
	results []result
	written bool
	lost    []int64
}

// pending holds completed runs while the claim loop is about to claim, for
// that claim to write (CompleteClaimer). A nil *pending is never open.
type pending struct {
	mu      sync.Mutex
	isOpen  bool
	results []result
}

// open lets completed runs wait for the next claim.
func (p *pending) open() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.isOpen = true
	p.mu.Unlock()
}

// put keeps res for the next claim and reports true, or reports false
// when no claim is coming soon: then res goes to the result writer.
func (p *pending) put(res result) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.isOpen {
		return false
	}
	p.results = append(p.results, res)
	return true
}

// take returns the runs waiting for a claim; more may join for the next.
func (p *pending) take() []result {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.results
	p.results = nil
	return out
}

// close stops runs from waiting for a claim and returns those waiting.
func (p *pending) close() []result {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isOpen = false
	out := p.results
	p.results = nil
	return out
}

// start runs j's handler on a slot of its own and hands its result to the
// writer.
func (r *runState) start(j *Job) {
	jctx, cancel := context.WithCancelCause(r.hardCtx)
	run := r.inflight.add(j, cancel)
	r.handlers.Add(1)
	go func() {
		defer r.handlers.Done()
		res := r.w.run(jctx, j)
		run.returned.Store(true)
		cancel(nil)
		if res.out != done || !r.pending.put(res) {
			r.results <- res
		}
		r.slots <- struct{}{}
	}()
}

// stop is the one way a Run ends. After ctx ended (fatal nil) handlers get
// ShutdownTimeout, or less after StopNow; after a fatal claim error they
// are cancelled at once. Then the heartbeat stops, the last results are
// written (within flushTimeout) and the claimer closes (within
// flushTimeout). It returns fatal, or else Close's error.
func (r *runState) stop(ctx context.Context, fatal error) error {
	w := r.w
	// Result writes end at the latest flushTimeout after the handlers'
	// time is up, even while handlers still wait to hand in their results.
	writeDeadline := time.AfterFunc(w.cfg.ShutdownTimeout+flushTimeout, r.writeStop)
	defer writeDeadline.Stop()
	defer r.writeStop()
	defer r.hardStop(nil)
	idle := make(chan struct{})
	go func() { r.handlers.Wait(); close(idle) }()
	t := time.NewTimer(w.cfg.ShutdownTimeout)
	defer t.Stop()
	if fatal != nil {
		r.hardStop(errShutdown)
	}
	select {
	case <-idle:
	case <-t.C:
		w.log.Warn("dbq: shutdown timeout; cancelling running jobs")
	case <-r.abort:
	}
	r.hardStop(errShutdown)
	<-idle
	r.hbStop()
	if r.hbDone != nil {
		<-r.hbDone
	}
	close(r.results)
	flushDeadline := time.AfterFunc(flushTimeout, r.writeStop)
	<-r.flushed
	flushDeadline.Stop()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	return cmp.Or(fatal, r.claimer.Close(cctx))
}

// inflight holds the jobs claimed and not yet settled: running, or run and
// waiting for their result to be written. The heartbeat renews the claims
// of all of them, so a result whose write is slow or retried is still this
// worker's when it lands.
type inflight struct {
	mu sync.Mutex
	m  map[int64]*running
}

// add records j as running under cancel. A job claimed again while an
// earlier run of it is in flight lost that earlier claim (its lease ran
// out, or its lock's connection ended) before the heartbeat said so: that
// run is cancelled.
func (f *inflight) add(j *Job, cancel context.CancelCauseFunc) *running {
	r := &running{job: j, cancel: cancel}
	f.mu.Lock()
	defer f.mu.Unlock()
	if old := f.m[j.ID]; old != nil {
		old.cancel(errLeaseLostCause)
	}
	f.m[j.ID] = r
	return r
}

// empty says whether no job is in flight: every job claimed has had its
// result written (or its claim found lost).
func (f *inflight) empty() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m) == 0
}

// settle forgets jobs whose results were written.
func (f *inflight) settle(jobs []*Job) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range jobs {
		if r := f.m[j.ID]; r != nil && r.job == j {
			delete(f.m, j.ID)
		}
	}
}

// leases returns the claims to renew.
func (f *inflight) leases() []Lease {
	f.mu.Lock()
	defer f.mu.Unlock()
	ls := make([]Lease, 0, len(f.m))
	for _, r := range f.m {
		ls = append(ls, r.job.Lease())
	}
	return ls
}

// lost cancels, with a lease-lost cause, the handlers still running under
// the lost leases, and returns their ids. A lease is matched on its token
// as well as its id: a heartbeat that read an earlier claim's lease must
// not cancel the run of a later claim of the same job.
func (f *inflight) lost(leases []Lease) []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var running []int64
	for _, l := range leases {
		if r := f.m[l.ID]; r != nil && r.job.Token == l.Token && !r.returned.Load() {
			r.cancel(errLeaseLostCause)
			running = append(running, l.ID)
		}
	}
	return running
}

// StopNow ends a Run at once, as if its context had ended and
// ShutdownTimeout run out: it stops claiming, cancels the contexts of the
// running handlers, releases the jobs whose handlers then return an error
// (no attempt spent), writes every result, closes its claimer and returns.
// It is for a second Ctrl-C, after a graceful shutdown began. It does
// nothing when no Run is under way.
func (w *Worker) StopNow() {
	w.stopMu.Lock()
	stop := w.stopNow
	w.stopMu.Unlock()
	if stop != nil {
		stop()
	}
}

func (w *Worker) setStopNow(f func()) {
	w.stopMu.Lock()
	w.stopNow = f
	w.stopMu.Unlock()
}

// idle waits d, or less when *wake fires, and reports false when ctx ends
// first. A closed wake channel means the driver can no longer wake us (its
// listener died): from then on the worker only polls.
func (w *Worker) idle(ctx context.Context, d time.Duration, wake *<-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case _, ok := <-*wake:
			if ok {
				return true
			}
			w.log.Warn("dbq: wake-ups stopped; polling only")
			*wake = nil
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// run calls the handler, recovering a panic as a failure. ctx's cause
// tells a lost lease and a hard stop from the handler's own errors.
func (w *Worker) run(ctx context.Context, j *Job) (res result) {
	res.job = j
	hctx := ctx
	var began time.Time
	if w.hooks != nil {
		res.ctx, began = ctx, time.Now()
	}
	defer func() {
		if p := recover(); p != nil {
			w.stats.panics.Add(1)
			res.out = failed
			res.err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			res.delay = w.cfg.Backoff(j.Attempt)
		}
		if w.hooks != nil {
			res.took = time.Since(began)
		}
	}()
	if w.hooks != nil {
		hctx = w.hooks.JobStart(ctx, j)
		res.ctx = hctx
	}
	err := w.handler(hctx, j)
	res.err = err
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errLeaseLostCause):
		res.out = lost
	case err != nil && isSnooze(err, &res.delay):
		// Before the shutdown case: a handler that asked to run later
		// said what it wants, and a snooze costs no attempt either.
		res.out = snoozed
	case err != nil && errors.Is(cause, errShutdown):
		res.out = released
	case err != nil:
		res.out = failed
		var p *permanentError
		res.perm = errors.As(err, &p)
		res.delay = w.cfg.Backoff(j.Attempt)
	default:
		res.out = done
	}
	return res
}

// isSnooze reports whether err is a Snooze, and sets *delay to its delay.
func isSnooze(err error, delay *time.Duration) bool {
	var s *SnoozeError
	if !errors.As(err, &s) {
		return false
	}
	*delay = s.Delay
	return true
}

// complete writes results in batches: whatever has arrived by the time the
// previous batch is written goes in the next one. It counts each result
// once its fate is known and reports it to the hooks.
//
// Results a claim took (handoffs) are accounted for the same way; those
// whose completion the claim wrote are not written again.
func (w *Worker) complete(ctx context.Context, c Claimer, results <-chan result, handoffs <-chan handoff, settled func([]*Job)) {
	const maxBatch = 500
	var jobs []*Job // the batch's, to hand to settled
	var act *workerActivity
	if w.cfg.Activity != nil {
		act = &workerActivity{a: w.cfg.Activity, queue: w.cfg.Queue, kinds: map[string]*activityCounts{}}
	}
	var (
		batch     []result
		completes []Lease
		retries   []RetryParams
		snoozes   []RetryParams
		releases  []Lease
		giveBack  []Lease
	)
	for {
		// What became of each write: its lost leases, or that it failed.
		var (
			lostIDs   map[int64]struct{}
			unwritten [nOutcomes]bool
		)
		addLost := func(lost []int64) {
			for _, id := range lost {
				if lostIDs == nil {
					lostIDs = make(map[int64]struct{}, len(lost))
				}
				lostIDs[id] = struct{}{}
			}
		}
		select {
		case first, ok := <-results:
			if !ok {
				return
			}
			batch = append(batch[:0], first)
		case h := <-handoffs:
			batch = append(batch[:0], h.results...)
			if len(h.lost) > 0 {
				w.leasesLost("complete", h.lost)
				addLost(h.lost)
			}
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case r, ok := <-results:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		completes, retries, snoozes, releases, giveBack = completes[:0], retries[:0], snoozes[:0], releases[:0], giveBack[:0]
		jobs = jobs[:0]
		for i := range batch {
			r := &batch[i]
			switch r.out {
			case done:
				if !r.written {
					completes = append(completes, r.job.Lease())
				}
			case failed:
				retries = append(retries, RetryParams{Lease: r.job.Lease(), Delay: r.delay, Error: r.err.Error(), Dead: r.perm})
			case snoozed:
				snoozes = append(snoozes, RetryParams{Lease: r.job.Lease(), Delay: r.delay, Snooze: true})
			case released:
				releases = append(releases, r.job.Lease())
			case lost:
				giveBack = append(giveBack, r.job.Lease())
			}
		}
		// A run ended because its claim was reported lost: give the claim
		// back in case it is still held after all (a Release of a lost
		// lease changes nothing), so that no job stays held by a claimer
		// whose worker has let it go.
		if len(giveBack) > 0 {
			gctx, cancel := context.WithTimeout(ctx, writeTimeout)
			_ = c.Release(gctx, giveBack)
			cancel()
		}
		write := func(out outcome, what string, n int, fn func(context.Context) error) {
			if n == 0 {
				return
			}
			lost, err := w.write(ctx, what, fn, n)
			unwritten[out] = err != nil
			addLost(lost)
		}
		write(done, "complete", len(completes), func(ctx context.Context) error { return c.Complete(ctx, completes) })
		write(failed, "retry", len(retries), func(ctx context.Context) error { return c.Retry(ctx, retries) })
		write(snoozed, "snooze", len(snoozes), func(ctx context.Context) error { return c.Retry(ctx, snoozes) })
		write(released, "release", len(releases), func(ctx context.Context) error { return c.Release(ctx, releases) })
		for i := range batch {
			jobs = append(jobs, batch[i].job)
		}
		settled(jobs)
		clear(jobs)
		for i := range batch {
			r := &batch[i]
			_, wasLost := lostIDs[r.job.ID]
			o := w.settle(r, wasLost, unwritten[r.out] && !r.written)
			if act != nil {
				act.count(r.job.Kind, o)
			}
			if w.hooks != nil {
				w.hooks.JobEnd(r.ctx, r.job, o, r.took, r.err)
			}
			batch[i] = result{} // let the job be collected
		}
	}
}

// settle counts one result whose write went as told and returns its
// outcome.
func (w *Worker) settle(r *result, wasLost, unwritten bool) Outcome {
	switch {
	case r.out == lost || wasLost:
		w.stats.lost.Add(1)
		return OutcomeLeaseLost
	case unwritten:
		return OutcomeUnrecorded
	}
	switch r.out {
	case done:
		w.stats.completed.Add(1)
		return OutcomeCompleted
	case failed:
		w.stats.retried.Add(1)
		if r.dead() {
			w.stats.dead.Add(1)
			return OutcomeDead
		}
		return OutcomeRetried
	case snoozed:
		w.stats.snoozed.Add(1)
		return OutcomeSnoozed
	default:
		w.stats.released.Add(1)
		return OutcomeReleased
	}
}

// write runs one batch write of n jobs, retrying transient failures for
// up to writeRetryFor (long enough to ride out a database restart, while
// the heartbeat keeps the jobs' leases), and returns the ids whose leases
// were lost, or the error that kept the batch from being written. Such a
// batch is logged; its jobs come back when their claims end (lease expiry
// or the claimer's connection closing), so they run again rather than
// being lost.
func (w *Worker) write(ctx context.Context, what string, fn func(context.Context) error, n int) (lostIDs []int64, err error) {
	deadline := time.Now().Add(writeRetryFor)
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, writeTimeout)
		err = fn(actx)
		cancel()
		if err == nil {
			return nil, nil
		}
		var lost *LeaseLostError
		if errors.As(err, &lost) {
			w.leasesLost(what, lost.IDs)
			return lost.IDs, nil
		}
		if errors.Is(err, ErrClosed) || errors.Is(err, ErrNotMigrated) || errors.Is(err, ErrUnsupportedServer) ||
			time.Now().After(deadline) ||
			!sleep(ctx, Jitter(min(time.Duration(50<<min(attempt, 10))*time.Millisecond, time.Second), 0.5)) {
			break
		}
	}
	w.log.Error("dbq: could not record results; the jobs will run again", "op", what, "jobs", n, "err", err)
	return nil, err
}

// leasesLost reports the ids whose leases a write (op) found lost.
func (w *Worker) leasesLost(op string, ids []int64) {
	w.log.Warn("dbq: leases lost", "op", op, "ids", ids)
	if w.hooks != nil {
		w.hooks.LeasesLost(w.cfg.Queue, ids)
	}
}

// leasesOf returns the leases of ls whose ids are in ids.
func leasesOf(ls []Lease, ids []int64) []Lease {
	want := make(map[int64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var out []Lease
	for _, l := range ls {
		if want[l.ID] {
			out = append(out, l)
		}
	}
	return out
}

// heartbeat extends the leases of running jobs every interval until ctx is
// done, and cancels (with lostFn, which returns those it cancelled) jobs
// whose lease was lost while their handler still ran. Each Extend may take at most
// one interval: one stuck on a dead connection or a lock wait would
// otherwise hold up every renewal behind it while the leases run out.
// After a failed Extend the next try comes an eighth of an interval later
// (backing off to a whole one while it keeps failing), so a lease of three
// intervals gets at least two more tries after a miss.
func (w *Worker) heartbeat(ctx context.Context, c Claimer, every time.Duration, held func() []Lease, lostFn func([]Lease) []int64) {
	if every <= 0 {
		every = time.Millisecond
	}
	t := time.NewTimer(every)
	defer t.Stop()
	fails := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next := every
		if ls := held(); len(ls) > 0 {
			ectx, cancel := context.WithTimeout(ctx, every)
			err := c.Extend(ectx, ls)
			cancel()
			var lost *LeaseLostError
			if err == nil || errors.As(err, &lost) {
				fails = 0
			}
			switch {
			case errors.As(err, &lost):
				if ids := lostFn(leasesOf(ls, lost.IDs)); len(ids) > 0 {
					w.log.Warn("dbq: leases lost; cancelling their handlers", "ids", ids)
					if w.hooks != nil {
						w.hooks.LeasesLost(w.cfg.Queue, ids)
					}
				}
			case err != nil && ctx.Err() == nil:
				w.log.Warn("dbq: heartbeat failed", "err", err)
				// every/8, /4, /2, then every interval while it keeps failing.
				next = Jitter(min(every, every/8<<min(fails, 3)), 0.5)
				fails++
			}
		}
		t.Reset(next)
	}
}
