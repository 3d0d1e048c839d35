package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
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
// It calls Extend on the jobs it holds every Claimer.Heartbeat: a lease
// claimer renews their leases, a lock claimer checks its lock connection. It cancels the handler of a job whose claim was
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
	if wk, ok := waker(w.q.drv); ok && !w.cfg.DisableWakeups {
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
// goroutines that run them, renew their claims and write their results.
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

	// gatherWait is defaultGatherWait; tests set it.
	gatherWait time.Duration

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

		gatherWait: defaultGatherWait,
	}
	if _, ok := completeClaimer(claimer); ok {
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
		w.writeResults(writeCtx, claimer, r.results, r.handoffs, r.inflight.forget)
	}()
	// Claims are renewed (or their connection checked) until the last
	// handler returns, past ctx.
	hbCtx, hbStop := context.WithCancel(r.hardCtx)
	r.hbStop = hbStop
	if every := claimer.Heartbeat(); every > 0 {
		r.hbDone = make(chan struct{})
		go func() {
			defer close(r.hbDone)
			w.heartbeat(hbCtx, claimer, every, r.inflight.leases, r.inflight.lost)
		}()
	}
	return r
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
