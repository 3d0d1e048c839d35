package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

func (r *Runner) enqueue(ctx context.Context) error {
	e, err := r.fresh(ctx, "")
	if err != nil {
		return err
	}
	defer e.close(ctx)
	for _, b := range r.cfg.Batches {
		n := max(b, r.cfg.EnqueueJobs/b*b)
		kase := fmt.Sprintf("batch=%d", b)
		batch := make([]queue.NewJob, b)
		for i := range batch {
			batch[i] = queue.NewJob{Queue: benchQueue}
		}
		start := time.Now()
		err := func() error {
			for done := 0; done < n; done += b {
				if _, err := e.q.Enqueue(ctx, batch...); err != nil {
					return err
				}
			}
			return nil
		}()
		r.add(rowOf(Row{Section: Enqueue, Impl: "dbq", Case: kase, Jobs: n}, time.Since(start), err))

		start = time.Now()
		err = e.floorInsert(ctx, n, b)
		r.add(rowOf(Row{Section: Enqueue, Impl: "floor", Case: kase, Jobs: n}, time.Since(start), err))
	}
	return nil
}

func rowOf(row Row, took time.Duration, err error) Row {
	if err != nil {
		row.Err = err.Error()
		return row
	}
	row.Seconds = took.Seconds()
	row.PerSec = rate(row.Jobs, took)
	return row
}

// withPool raises the PostgreSQL pool to fit conns claimers, whose
// advisory sessions each hold a connection.
func withPool(dsn string, d dialect.Name, conns int) string {
	if d != dialect.Postgres || !strings.Contains(dsn, "://") {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	v := u.Query()
	v.Set("pool_max_conns", fmt.Sprint(max(conns+4, 16)))
	u.RawQuery = v.Encode()
	return u.String()
}

func (r *Runner) drain(ctx context.Context) error {
	// A batch other than the default shows in the case, so that dbq's row
	// is set beside the floor's of the same batch (WriteTable).
	kase := func(w int) string {
		if r.cfg.DrainBatch != defaultDrainBatch {
			return fmt.Sprintf("workers=%d batch=%d", w, r.cfg.DrainBatch)
		}
		return fmt.Sprintf("workers=%d", w)
	}
	for _, s := range r.cfg.Strategies {
		for _, w := range r.cfg.Workers {
			e, err := r.fresh(ctx, s)
			if err != nil {
				return err
			}
			row := Row{Section: Drain, Impl: "dbq", Strategy: s, Case: kase(w), Workers: w, Jobs: r.cfg.N,
				Batch: r.cfg.DrainBatch, Concurrency: r.cfg.DrainConcurrency}
			took, err := r.drainDBQ(ctx, e, s, w)
			r.add(rowOf(row, took, err))
			e.close(ctx)
		}
	}
	// The floor does not depend on the strategy: measure it once.
	for _, w := range r.cfg.Workers {
		e, err := r.fresh(ctx, "")
		if err != nil {
			return err
		}
		row := Row{Section: Drain, Impl: "floor", Case: kase(w), Workers: w, Jobs: r.cfg.N, Batch: r.cfg.DrainBatch}
		took, err := r.drainFloor(ctx, e, w)
		r.add(rowOf(row, took, err))
		e.close(ctx)
	}
	return nil
}

// drainPoll is the drain Workers' PollInterval.
const drainPoll = 20 * time.Millisecond

// drainDBQ runs `workers` Workers, each with its own claimer taking batches
// of Config.DrainBatch, over N pre-filled no-op jobs, and times them to the
// last completion written.
func (r *Runner) drainDBQ(ctx context.Context, e *env, strategy string, workers int) (time.Duration, error) {
	if err := fill(ctx, e.q, r.cfg.N, 0); err != nil {
		return 0, err
	}
	q, err := dbq.Open(ctx, withPool(r.dsn, r.d, workers), dbq.Options{Config: e.q.Config(), Strategy: strategy})
	if err != nil {
		return 0, err
	}
	defer q.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ws := make([]*queue.Worker, workers)
	for i := range ws {
		ws[i], err = queue.NewWorker(q, func(context.Context, *queue.Job) error { return nil },
			queue.WorkerConfig{Queue: benchQueue, Concurrency: r.cfg.DrainConcurrency, BatchSize: r.cfg.DrainBatch,
				PollInterval: drainPoll})
		if err != nil {
			return 0, err
		}
	}
	start := time.Now()
	errc := make(chan error, workers)
	for _, w := range ws {
		go func() { errc <- w.Run(ctx) }()
	}
	completed := func() int64 {
		var n int64
		for _, w := range ws {
			n += w.Stats().Completed
		}
		return n
	}
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for completed() < int64(r.cfg.N) {
		select {
		case err := <-errc:
			return 0, fmt.Errorf("worker stopped early: %v", err)
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
		}
	}
	took := time.Since(start)
	cancel()
	for range ws {
		if err := <-errc; err != nil {
			return took, fmt.Errorf("worker shutdown: %w", err)
		}
	}
	return took, nil
}

func (r *Runner) drainFloor(ctx context.Context, e *env, conns int) (time.Duration, error) {
	if err := e.floorInsert(ctx, r.cfg.N, 1000); err != nil {
		return 0, err
	}
	e.db.SetMaxOpenConns(conns)
	e.db.SetMaxIdleConns(conns)
	var (
		wg    sync.WaitGroup
		total atomic.Int64
		first atomic.Value
	)
	start := time.Now()
	for range conns {
		wg.Go(func() {
			for total.Load() < int64(r.cfg.N) && first.Load() == nil {
				n, err := e.floorDelete(ctx, r.cfg.DrainBatch)
				if err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
				total.Add(int64(n))
				if n == 0 {
					// Not empty: the rest are locked by the other
					// connections' deletes (SKIP LOCKED), or their
					// transactions rolled back. Look again.
					if ctx.Err() != nil {
						first.CompareAndSwap(nil, ctx.Err())
						return
					}
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err, _ := first.Load().(error); err != nil {
		return 0, err
	}
	if got := total.Load(); got != int64(r.cfg.N) {
		return 0, fmt.Errorf("floor deleted %d of %d", got, r.cfg.N)
	}
	return took, nil
}

// depth measures the latency of taking one job and finishing it as the
// table grows, then with future jobs ahead of the ready ones in index order
// (lower priority value, later run_at), which a claim must skip over. Both
// sides time the same work per sample: dbq a Claim of one job and its
// Complete (two statements), the floor one DELETE of a ready row (claim
// and completion in one).
func (r *Runner) depth(ctx context.Context) error {
	e, err := r.fresh(ctx, "")
	if err != nil {
		return err
	}
	defer e.close(ctx)
	have := 0
	measure := func(kase string) error {
		for _, s := range r.cfg.Strategies {
			q, err := dbq.Open(ctx, r.dsn, dbq.Options{Config: e.q.Config(), Strategy: s})
			if err != nil {
				return err
			}
			lat, err := claimCompleteLatency(ctx, q, r.cfg.Samples)
			q.Close()
			r.add(latencyResult(Row{Section: Depth, Impl: "dbq", Strategy: s, Case: kase}, lat, err))
		}
		lat, err := timeEach(r.cfg.Samples, func() error {
			n, err := e.floorDelete(ctx, 1)
			if err == nil && n != 1 {
				err = fmt.Errorf("floor took %d jobs, want 1", n)
			}
			return err
		})
		r.add(latencyResult(Row{Section: Depth, Impl: "floor", Case: kase}, lat, err))
		return nil
	}
	per := r.cfg.Samples * (len(r.cfg.Strategies) + 1) // what each measure consumes
	for _, size := range r.cfg.DepthSizes {
		if err := fill(ctx, e.q, size-have+per, 0); err != nil {
			return err
		}
		have = size
		if err := measure(fmt.Sprintf("ready=%d", size)); err != nil {
			return err
		}
	}
	future := make([]queue.NewJob, 1000)
	for i := range future {
		future[i] = queue.NewJob{Queue: benchQueue, Priority: -1, Delay: 24 * time.Hour}
	}
	for done := 0; done < r.cfg.DepthFuture; done += 1000 {
		if _, err := e.q.Enqueue(ctx, future[:min(1000, r.cfg.DepthFuture-done)]...); err != nil {
			return err
		}
	}
	if err := fill(ctx, e.q, per, 0); err != nil {
		return err
	}
	return measure(fmt.Sprintf("ready=%d+future=%d", have, r.cfg.DepthFuture))
}

// latencyResult is row with the latencies lat, or with err.
func latencyResult(row Row, lat []time.Duration, err error) Row {
	if err != nil {
		row.Err = err.Error()
		return row
	}
	return latencyRow(row, lat)
}

// timeEach runs step samples times and returns how long each run took;
// it stops at the first error.
func timeEach(samples int, step func() error) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, samples)
	for range samples {
		t := time.Now()
		if err := step(); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(t))
	}
	return lat, nil
}

// claimCompleteLatency times samples runs of a Claim of one job on q and
// the Complete that ends it.
func claimCompleteLatency(ctx context.Context, q *queue.Queue, samples int) ([]time.Duration, error) {
	c, err := q.NewClaimer(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.WithoutCancel(ctx))
	return timeEach(samples, func() error {
		jobs, err := c.Claim(ctx, benchQueue, 1)
		if err != nil {
			return err
		}
		if len(jobs) != 1 {
			return fmt.Errorf("claim got %d jobs, want 1", len(jobs))
		}
		return c.Complete(ctx, queue.Leases(jobs))
	})
}

// pickup times enqueue to handler start on an idle queue, one job at a
// time, with the worker's default poll interval (PostgreSQL wakes it by
// LISTEN/NOTIFY).
func (r *Runner) pickup(ctx context.Context) error {
	for _, s := range r.cfg.Strategies {
		e, err := r.fresh(ctx, s)
		if err != nil {
			return err
		}
		lat, err := r.pickupDBQ(ctx, e.q)
		r.add(latencyResult(Row{Section: Pickup, Impl: "dbq", Strategy: s, Case: "idle"}, lat, err))
		e.close(ctx)
	}
	return nil
}

func (r *Runner) pickupDBQ(ctx context.Context, q *queue.Queue) (_ []time.Duration, err error) {
	seen := make(chan time.Duration, 1)
	w, err := queue.NewWorker(q, func(_ context.Context, j *queue.Job) error {
		sent := int64(binary.BigEndian.Uint64(j.Payload))
		seen <- time.Since(time.Unix(0, sent))
		return nil
	}, queue.WorkerConfig{Queue: benchQueue, Concurrency: 1})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if werr := <-done; werr != nil && err == nil {
			err = fmt.Errorf("worker: %w", werr)
		}
	}()
	// Each sample can wait a whole poll interval: keep the count modest.
	samples := max(10, r.cfg.Samples/10)
	lat := make([]time.Duration, 0, samples)
	time.Sleep(100 * time.Millisecond) // let the worker reach its idle wait
	for range samples {
		p := binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))
		if _, err := q.Enqueue(ctx, queue.NewJob{Queue: benchQueue, Payload: p}); err != nil {
			return nil, err
		}
		select {
		case d := <-seen:
			lat = append(lat, d)
		case err := <-done:
			return nil, fmt.Errorf("worker stopped: %v", err)
		case <-time.After(30 * time.Second):
			return nil, fmt.Errorf("job not picked up in 30s")
		}
	}
	return lat, nil
}

// steady works SteadyTotal jobs with 4 Workers while 4 producers enqueue
// in batches of 100 until the Workers are done (faster than they drain, so
// both windows are worked beside the producers and from a backlog), and
// compares the throughput of the first and the last SteadyWindow.
func (r *Runner) steady(ctx context.Context) error {
	for _, s := range r.cfg.Strategies {
		e, err := r.fresh(ctx, s)
		if err != nil {
			return err
		}
		first, last, err := r.steadyDBQ(ctx, e.q)
		row := Row{Section: Steady, Impl: "dbq", Strategy: s, Jobs: r.cfg.SteadyWindow}
		a, b := row, row
		a.Case, b.Case = "first", "last"
		r.add(rowOf(a, first, err))
		r.add(rowOf(b, last, err))
		e.close(ctx)
	}
	return nil
}

func (r *Runner) steadyDBQ(ctx context.Context, q *queue.Queue) (first, last time.Duration, err error) {
	total, window := r.cfg.SteadyTotal, r.cfg.SteadyWindow
	if window*2 > total {
		return 0, 0, fmt.Errorf("window %d is more than half of %d", window, total)
	}
	var (
		count atomic.Int64
		marks = make([]time.Time, 3) // at window, total-window, total
		mu    sync.Mutex
		all   = make(chan struct{})
	)
	mark := func(n int64) {
		i := -1
		switch n {
		case int64(window):
			i = 0
		case int64(total - window):
			i = 1
		case int64(total):
			i = 2
		}
		if i >= 0 {
			mu.Lock()
			marks[i] = time.Now()
			mu.Unlock()
			if i == 2 {
				close(all)
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Producers enough to keep a backlog: with one, the workers caught up
	// with it and the last window measured the producer, not the queue.
	const workers, producers = 4, 4
	errc := make(chan error, workers+producers)
	// A head start of one window, so workers do not start on an empty queue.
	if err := fill(ctx, q, window, 0); err != nil {
		return 0, 0, err
	}
	var wg sync.WaitGroup
	// The producers keep enqueueing until the workers have done total
	// jobs, so that both windows are worked beside them and with a backlog.
	for range producers {
		wg.Go(func() {
			batch := make([]queue.NewJob, 100)
			for i := range batch {
				batch[i] = queue.NewJob{Queue: benchQueue}
			}
			for {
				select {
				case <-all:
					return
				case <-ctx.Done():
					return
				default:
				}
				if _, err := q.Enqueue(ctx, batch...); err != nil {
					if ctx.Err() == nil {
						errc <- err
					}
					return
				}
			}
		})
	}
	start := time.Now()
	for range workers {
		w, err := queue.NewWorker(q, func(context.Context, *queue.Job) error {
			mark(count.Add(1))
			return nil
		}, queue.WorkerConfig{Queue: benchQueue, Concurrency: 100, BatchSize: 100, PollInterval: 20 * time.Millisecond})
		if err != nil {
			return 0, 0, err
		}
		wg.Go(func() {
			if err := w.Run(ctx); err != nil {
				errc <- err
			}
		})
	}
	select {
	case <-all:
	case err = <-errc:
		err = fmt.Errorf("stopped early: %v", err)
	case <-ctx.Done():
		err = ctx.Err()
	}
	// The workers must be gone before the caller closes the queue.
	cancel()
	wg.Wait()
	if err != nil {
		return 0, 0, err
	}
	mu.Lock()
	defer mu.Unlock()
	return marks[0].Sub(start), marks[2].Sub(marks[1]), nil
}
