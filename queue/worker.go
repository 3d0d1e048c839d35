package queue

import (
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
// error is wrapped by Permanent. A panic counts as an error. ctx is
// cancelled when the worker hard-stops or the job's lease is lost.
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
	// most 1000.
	BatchSize int
	// PollInterval is the pause after a claim that found less than it asked
	// for, with ±20% jitter. Default 1s.
	PollInterval time.Duration
	// ShutdownTimeout is how long in-flight handlers may run on after Run's
	// context is cancelled; then their contexts are cancelled and their jobs
	// released. Default 30s.
	ShutdownTimeout time.Duration
	// Backoff gives the delay before a failed job's next run. Default
	// DefaultBackoff.
	Backoff Backoff
	// Logger defaults to the Queue's logger.
	Logger *slog.Logger
}

// Worker claims jobs from one queue and runs them with a Handler on
// Concurrency goroutines. Completions and failures are written in batches.
// For lease-based claimers it renews every held job's lease each third of
// the lease, and cancels a handler whose lease was lost.
type Worker struct {
	q       *Queue
	handler Handler
	cfg     WorkerConfig
	log     *slog.Logger

	running atomic.Bool
	stats   workerCounters
}

type workerCounters struct {
	claimed, completed, retried, released, lost, panics, claimErrors atomic.Int64
}

// WorkerStats counts what a Worker has done since it was made.
type WorkerStats struct {
	Claimed, Completed, Retried, Released, LeasesLost, Panics, ClaimErrors int64
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
	return &Worker{q: q, handler: h, cfg: cfg, log: cfg.Logger.With("queue", cfg.Queue)}, nil
}

// Stats returns the worker's counters.
func (w *Worker) Stats() WorkerStats {
	c := &w.stats
	return WorkerStats{
		Claimed: c.claimed.Load(), Completed: c.completed.Load(), Retried: c.retried.Load(),
		Released: c.released.Load(), LeasesLost: c.lost.Load(), Panics: c.panics.Load(),
		ClaimErrors: c.claimErrors.Load(),
	}
}

// outcome is what became of one job.
type outcome int

const (
	done outcome = iota
	failed
	released
	lost
)

type result struct {
	job   *Job
	out   outcome
	err   error
	perm  bool
	delay time.Duration
}

type running struct {
	job    *Job
	cancel context.CancelCauseFunc
}

// claimTimeout bounds one claim.
const claimTimeout = 30 * time.Second

var errShutdown = errors.New("dbq: worker shut down")
var errLeaseLostCause = errors.New("dbq: lease lost")

// Run works the queue until ctx is cancelled, then shuts down gracefully:
// it stops claiming, lets running handlers finish within ShutdownTimeout,
// cancels and releases the rest, flushes every result and closes its
// claimer. It returns nil after a graceful shutdown, or the error that kept
// it from starting. A Worker runs once at a time.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: worker already running", ErrInvalidConfig)
	}
	defer w.running.Store(false)

	claimer, err := w.q.NewClaimer(ctx)
	if err != nil {
		return err
	}
	// Handlers run on a context that outlives ctx by ShutdownTimeout.
	hardCtx, hardStop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer hardStop(nil)

	results := make(chan result, w.cfg.Concurrency)
	flushed := make(chan struct{})
	go func() {
		w.complete(claimer, results)
		close(flushed)
	}()

	var (
		mu       sync.Mutex
		inflight = map[int64]*running{}
		wg       sync.WaitGroup
		slots    = make(chan struct{}, w.cfg.Concurrency)
	)
	for range w.cfg.Concurrency {
		slots <- struct{}{}
	}

	// Leases are renewed until the last handler returns, past ctx.
	hbCtx, hbStop := context.WithCancel(hardCtx)
	defer hbStop()
	var hbDone chan struct{}
	if ld, ok := claimer.(LeaseDuration); ok && ld.LeaseDuration() > 0 {
		hbDone = make(chan struct{})
		go func() {
			defer close(hbDone)
			w.heartbeat(hbCtx, claimer, ld.LeaseDuration()/3, func() []Lease {
				mu.Lock()
				defer mu.Unlock()
				ls := make([]Lease, 0, len(inflight))
				for _, r := range inflight {
					ls = append(ls, r.job.Lease())
				}
				return ls
			}, func(ids []int64) {
				mu.Lock()
				defer mu.Unlock()
				for _, id := range ids {
					if r := inflight[id]; r != nil {
						r.cancel(errLeaseLostCause)
					}
				}
			})
		}()
	}

	start := func(j *Job) {
		jctx, cancel := context.WithCancelCause(hardCtx)
		mu.Lock()
		inflight[j.ID] = &running{job: j, cancel: cancel}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := w.run(jctx, j)
			cancel(nil)
			mu.Lock()
			delete(inflight, j.ID)
			mu.Unlock()
			results <- res
			slots <- struct{}{}
		}()
	}

	backoff := time.Duration(0)
claimLoop:
	for {
		// Wait for at least one free slot.
		select {
		case <-ctx.Done():
			break claimLoop
		case <-slots:
		}
		free := 1
	take:
		for free < w.cfg.BatchSize {
			select {
			case <-slots:
				free++
			default:
				break take
			}
		}
		// A claim is never cut off by shutdown: it is short, and cutting it
		// off may cost a lock-based claimer its connection and with it the
		// locks of the jobs still running.
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
		jobs, err := claimer.Claim(cctx, w.cfg.Queue, free)
		ccancel()
		for range free - len(jobs) {
			slots <- struct{}{}
		}
		if err != nil {
			if ctx.Err() != nil {
				break claimLoop
			}
			if errors.Is(err, ErrClosed) || errors.Is(err, ErrNotMigrated) {
				hardStop(errShutdown)
				wg.Wait()
				hbStop()
				if hbDone != nil {
					<-hbDone
				}
				close(results)
				<-flushed
				_ = claimer.Close(context.WithoutCancel(ctx))
				return err
			}
			w.stats.claimErrors.Add(1)
			backoff = min(max(2*backoff, 100*time.Millisecond), 30*time.Second)
			w.log.Warn("dbq: claim failed; retrying", "err", err, "in", backoff)
			if !sleep(ctx, Jitter(backoff, 0.5)) {
				break claimLoop
			}
			continue
		}
		backoff = 0
		w.stats.claimed.Add(int64(len(jobs)))
		for _, j := range jobs {
			start(j)
		}
		if len(jobs) < free {
			if !sleep(ctx, Jitter(w.cfg.PollInterval, 0.2)) {
				break claimLoop
			}
		}
	}

	// Graceful shutdown: let handlers finish, then hard-stop the rest.
	idle := make(chan struct{})
	go func() { wg.Wait(); close(idle) }()
	t := time.NewTimer(w.cfg.ShutdownTimeout)
	select {
	case <-idle:
		t.Stop()
	case <-t.C:
		w.log.Warn("dbq: shutdown timeout; cancelling running jobs")
		hardStop(errShutdown)
		<-idle
	}
	hbStop()
	if hbDone != nil {
		<-hbDone
	}
	close(results)
	<-flushed
	return claimer.Close(context.WithoutCancel(ctx))
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

// run calls the handler, recovering a panic as a failure.
func (w *Worker) run(ctx context.Context, j *Job) (res result) {
	res.job = j
	defer func() {
		if p := recover(); p != nil {
			w.stats.panics.Add(1)
			res.out = failed
			res.err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			res.delay = w.cfg.Backoff(j.Attempt)
		}
	}()
	err := w.handler(ctx, j)
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errLeaseLostCause):
		res.out = lost
	case err != nil && errors.Is(cause, errShutdown):
		res.out = released
	case err != nil:
		res.out = failed
		res.err = err
		var p *permanentError
		res.perm = errors.As(err, &p)
		res.delay = w.cfg.Backoff(j.Attempt)
	default:
		res.out = done
	}
	return res
}

// complete writes results in batches: whatever has arrived by the time the
// previous batch is written goes in the next one.
func (w *Worker) complete(c Claimer, results <-chan result) {
	const maxBatch = 500
	ctx := context.Background()
	var (
		completes []Lease
		retries   []RetryParams
		releases  []Lease
	)
	for first := range results {
		batch := []result{first}
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
		completes, retries, releases = completes[:0], retries[:0], releases[:0]
		for _, r := range batch {
			switch r.out {
			case done:
				completes = append(completes, r.job.Lease())
			case failed:
				retries = append(retries, RetryParams{Lease: r.job.Lease(), Delay: r.delay, Error: r.err.Error(), Dead: r.perm})
			case released:
				releases = append(releases, r.job.Lease())
			case lost:
				w.stats.lost.Add(1)
			}
		}
		if len(completes) > 0 {
			w.write(ctx, "complete", func(ctx context.Context) error { return c.Complete(ctx, completes) }, &w.stats.completed, len(completes))
		}
		if len(retries) > 0 {
			w.write(ctx, "retry", func(ctx context.Context) error { return c.Retry(ctx, retries) }, &w.stats.retried, len(retries))
		}
		if len(releases) > 0 {
			w.write(ctx, "release", func(ctx context.Context) error { return c.Release(ctx, releases) }, &w.stats.released, len(releases))
		}
	}
}

// write runs one batch write, retrying transient failures a few times. A
// batch that cannot be written is logged; its jobs come back when their
// claims end (lease expiry or the claimer's connection closing), so they
// run again rather than being lost.
func (w *Worker) write(ctx context.Context, what string, fn func(context.Context) error, counter *atomic.Int64, n int) {
	var err error
	for attempt := range 5 {
		err = fn(ctx)
		if err == nil {
			counter.Add(int64(n))
			return
		}
		var lost *LeaseLostError
		if errors.As(err, &lost) {
			counter.Add(int64(n - len(lost.IDs)))
			w.stats.lost.Add(int64(len(lost.IDs)))
			w.log.Warn("dbq: leases lost", "op", what, "ids", lost.IDs)
			return
		}
		if errors.Is(err, ErrClosed) {
			break
		}
		time.Sleep(Jitter(time.Duration(50<<attempt)*time.Millisecond, 0.5))
	}
	w.log.Error("dbq: could not record results; the jobs will run again", "op", what, "jobs", n, "err", err)
}

// heartbeat extends the leases of running jobs every interval until ctx is
// done, and cancels jobs whose lease was lost.
func (w *Worker) heartbeat(ctx context.Context, c Claimer, every time.Duration, held func() []Lease, lostFn func([]int64)) {
	if every <= 0 {
		every = time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ls := held()
		if len(ls) == 0 {
			continue
		}
		err := c.Extend(ctx, ls)
		var lost *LeaseLostError
		switch {
		case errors.As(err, &lost):
			w.log.Warn("dbq: leases lost; cancelling their handlers", "ids", lost.IDs)
			lostFn(lost.IDs)
		case err != nil && ctx.Err() == nil:
			w.log.Warn("dbq: heartbeat failed", "err", err)
		}
	}
}
