package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// ActivityCount is what one process did on one queue in one minute: jobs
// completed, retried (failed, to run again) and made dead (failed for
// good); a failed job is counted once, as retried or as dead. Kind is "" for jobs without one, "other" past
// MaxActivityKinds kinds of a queue.
type ActivityCount struct {
	Process   string    `json:"process,omitempty"`
	Queue     string    `json:"queue"`
	Kind      string    `json:"kind,omitempty"`
	Minute    time.Time `json:"minute"`
	Completed int64     `json:"completed"`
	Retried   int64     `json:"retried"`
	Dead      int64     `json:"dead"`
}

// ProcessInfo is a process running Workers, as its heartbeat stores it.
type ProcessInfo struct {
	ID   string `json:"id"`
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// Queues are the queues its running Workers work, sorted; Concurrency
	// the sum of their handler slots.
	Queues      []string  `json:"queues"`
	Concurrency int       `json:"concurrency"`
	StartedAt   time.Time `json:"started_at"`
	SeenAt      time.Time `json:"seen_at"`
}

// Gone reports whether the process has missed its heartbeats for
// ProcessGoneAfter at now: it exited without removing its row, or cannot
// reach the database.
func (p ProcessInfo) Gone(now time.Time) bool { return now.Sub(p.SeenAt) > ProcessGoneAfter }

// ActivityPrune is what [ActivityStore.PruneActivity] deletes.
type ActivityPrune struct {
	Before              time.Time
	Limit               int
	ProcessesSeenBefore time.Time
}

// Limits of the activity tables.
const (
	// MaxActivityBatch is the most counts one AddActivity gets.
	MaxActivityBatch = 100
	// MaxActivityKinds bounds the kinds an Activity counts apart per
	// queue; later kinds are counted as "other".
	MaxActivityKinds = 200
	// MaxHostLen and MaxProcessQueuesLen bound the stored host name and
	// the queue list (comma-separated); longer ones are cut.
	MaxHostLen          = 255
	MaxProcessQueuesLen = 1000
	// ProcessGoneAfter is how long a process's row may go without a
	// heartbeat before it is shown as gone; ProcessRetention, before its
	// row is pruned.
	ProcessGoneAfter = 2 * time.Minute
	ProcessRetention = 30 * time.Minute
)

// Defaults for [ActivityConfig] fields left zero.
const (
	DefaultActivityFlush     = 10 * time.Second
	DefaultActivityRetention = 7 * 24 * time.Hour
	// pruneEvery is how many flushes pass between prunes; pruneLimit is
	// the most activity rows one prune deletes.
	pruneEvery = 10
	pruneLimit = 5000
	// maxPending bounds the counts kept for a later flush while the
	// database cannot be written.
	maxPending = 10000
)

// ActivityConfig tunes an Activity. The zero value means the defaults.
type ActivityConfig struct {
	// FlushInterval is how often the counts are written and the process's
	// row touched; a flush also follows each minute's end, so no write
	// mixes two minutes. Default 10s, at most 1 minute.
	FlushInterval time.Duration
	// Retention is how long activity rows are kept; the flusher deletes
	// older ones, a bounded batch every tenth flush. Default 7 days.
	Retention time.Duration
	// Host names the machine in the process row. Default os.Hostname().
	Host string
	// Logger defaults to the Queue's logger.
	Logger *slog.Logger
}

// Activity counts what the Workers of one process do and keeps the
// process's row in the processes table: one per process, shared by its
// Workers through WorkerConfig.Activity, started with Run. A Worker's
// cost per job is a map lookup and an atomic add in memory; the database
// sees one upsert of the counts and one heartbeat per flush, whatever the
// job rate. An embedding app does what `dbq work` does:
//
//	act, err := queue.NewActivity(q, queue.ActivityConfig{})
//	// handle err: ErrUnsupported when the driver keeps no activity
//	go act.Run(ctx) // flushes until ctx ends, then removes the row
//	w, err := queue.NewWorker(q, handler, queue.WorkerConfig{Queue: "email", Activity: act})
type Activity struct {
	q     *Queue
	store ActivityStore
	cfg   ActivityConfig
	log   *slog.Logger
	id    string
	start time.Time

	mu      sync.Mutex
	byQueue map[string]*queueActivity
	workers map[*Worker]workerSlot // the running Workers
	pending map[activityKey]ActivityCount
	running atomic.Bool
	// kick asks Run to flush now: a Worker started or stopped, which the
	// process row should show without waiting for the next flush.
	kick chan struct{}
}

type workerSlot struct {
	queue string
	n     int
}

type activityKey struct {
	queue, kind string
	minute      time.Time
}

// queueActivity holds one queue's counters by kind.
type queueActivity struct {
	kinds map[string]*activityCounts // guarded by Activity.mu
}

// activityCounts are one (queue, kind)'s counts since the last flush.
type activityCounts struct {
	completed, retried, dead atomic.Int64
}

// NewActivity returns the Activity of this process for q's database. It
// returns ErrUnsupported when q's driver keeps no activity.
func NewActivity(q *Queue, cfg ActivityConfig) (*Activity, error) {
	if q == nil {
		return nil, fmt.Errorf("%w: NewActivity needs a queue", ErrInvalidConfig)
	}
	s := ActivityStore(q.drv)
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = DefaultActivityFlush
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultActivityRetention
	}
	switch {
	case cfg.FlushInterval < 0 || cfg.FlushInterval > time.Minute:
		return nil, fmt.Errorf("%w: FlushInterval %v not in (0, 1m]", ErrInvalidConfig, cfg.FlushInterval)
	case cfg.Retention < time.Hour:
		return nil, fmt.Errorf("%w: Retention %v under 1h", ErrInvalidConfig, cfg.Retention)
	}
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	cfg.Host = cutString(cfg.Host, MaxHostLen)
	if cfg.Logger == nil {
		cfg.Logger = q.cfg.Logger
	}
	b := make([]byte, 8)
	rand.Read(b)
	return &Activity{
		q: q, store: s, cfg: cfg, log: cfg.Logger, id: hex.EncodeToString(b), start: time.Now().UTC(),
		byQueue: map[string]*queueActivity{}, workers: map[*Worker]workerSlot{},
		pending: map[activityKey]ActivityCount{}, kick: make(chan struct{}, 1),
	}, nil
}

// ID returns the process id its rows are stored under: 16 random hex
// digits, new for each Activity.
func (a *Activity) ID() string { return a.id }

// counter returns the counters of (queue, kind), made on first use; past
// MaxActivityKinds kinds of the queue, those of "other".
func (a *Activity) counter(queueName, kind string) *activityCounts {
	a.mu.Lock()
	defer a.mu.Unlock()
	qa := a.byQueue[queueName]
	if qa == nil {
		qa = &queueActivity{kinds: map[string]*activityCounts{}}
		a.byQueue[queueName] = qa
	}
	c := qa.kinds[kind]
	if c == nil {
		if len(qa.kinds) >= MaxActivityKinds {
			kind = "other"
			if c = qa.kinds[kind]; c != nil {
				return c
			}
		}
		c = &activityCounts{}
		qa.kinds[kind] = c
	}
	return c
}

// join records a Worker's Run in the process row until leave.
func (a *Activity) join(w *Worker) (leave func()) {
	a.mu.Lock()
	a.workers[w] = workerSlot{w.cfg.Queue, w.cfg.Concurrency}
	a.mu.Unlock()
	a.flushSoon()
	return func() {
		a.mu.Lock()
		delete(a.workers, w)
		a.mu.Unlock()
		a.flushSoon()
	}
}

func (a *Activity) flushSoon() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Run flushes every FlushInterval, after each minute's end, and when a
// Worker starts or stops (so the process row shows it), until ctx ends, then flushes once more and removes the process's row. A failed
// flush is logged and its counts kept for the next. It returns nil, or
// ErrInvalidConfig when this Activity already runs.
func (a *Activity) Run(ctx context.Context) error {
	if !a.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: activity already running", ErrInvalidConfig)
	}
	defer a.running.Store(false)
	failing := false
	for n := 0; ; n++ {
		// Each flush on a context of its own, bounded, that ctx's end does
		// not cut short: a write cancelled after its commit reports an
		// error, its counts would be kept, and the last flush would add
		// them a second time (TestActivityRunCountsOnceAtShutdown).
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		err := a.Flush(fctx, n%pruneEvery == 0)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			a.log.Warn("dbq: activity flush failed; counts kept for the next", "err", err)
			failing = true
		case err == nil && failing:
			a.log.Info("dbq: activity flushes again")
			failing = false
		}
		now := time.Now()
		wait := time.NewTimer(min(a.cfg.FlushInterval, now.Truncate(time.Minute).Add(time.Minute).Sub(now)))
		select {
		case <-ctx.Done():
			wait.Stop()
		case <-a.kick:
			wait.Stop()
			continue
		case <-wait.C:
			continue
		}
		break
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	if err := a.Flush(fctx, false); err != nil {
		a.log.Warn("dbq: last activity flush failed", "err", err)
	}
	if err := a.store.RemoveProcess(fctx, a.id); err != nil {
		a.log.Warn("dbq: could not remove the process row", "err", err)
	}
	return nil
}

// Flush writes the counts gathered since the last flush under the current
// minute, touches the process's row and, with prune, deletes activity
// older than Retention and processes gone for ProcessRetention. Run calls
// it; a test or an app with its own loop may too.
func (a *Activity) Flush(ctx context.Context, prune bool) error {
	now := time.Now().UTC()
	counts := a.take(now.Truncate(time.Minute))
	var errs []error
	for len(counts) > 0 {
		n := min(len(counts), MaxActivityBatch)
		if err := a.store.AddActivity(ctx, counts[:n]); err != nil {
			a.keep(counts, now)
			errs = append(errs, err)
			break
		}
		counts = counts[n:]
	}
	if err := a.store.TouchProcess(ctx, a.process(now)); err != nil {
		errs = append(errs, err)
	}
	if prune && len(errs) == 0 {
		_, err := a.store.PruneActivity(ctx, ActivityPrune{
			Before: now.Add(-a.cfg.Retention), Limit: pruneLimit, ProcessesSeenBefore: now.Add(-ProcessRetention),
		})
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// take swaps every counter to zero and returns the non-zero counts under
// minute, with those a failed flush kept.
func (a *Activity) take(minute time.Time) []ActivityCount {
	a.mu.Lock()
	defer a.mu.Unlock()
	for qn, qa := range a.byQueue {
		for kind, c := range qa.kinds {
			done, retried, dead := c.completed.Swap(0), c.retried.Swap(0), c.dead.Swap(0)
			if done|retried|dead == 0 {
				continue
			}
			k := activityKey{qn, kind, minute}
			p := a.pending[k]
			p.Completed, p.Retried, p.Dead = p.Completed+done, p.Retried+retried, p.Dead+dead
			a.pending[k] = p
		}
	}
	out := make([]ActivityCount, 0, len(a.pending))
	for k, c := range a.pending {
		c.Process, c.Queue, c.Kind, c.Minute = a.id, k.queue, k.kind, k.minute
		out = append(out, c)
	}
	clear(a.pending)
	return out
}

// keep puts counts a flush could not write back for the next one, up to
// maxPending and within Retention.
func (a *Activity) keep(counts []ActivityCount, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range counts {
		if len(a.pending) >= maxPending || now.Sub(c.Minute) > a.cfg.Retention {
			continue
		}
		k := activityKey{c.Queue, c.Kind, c.Minute}
		p := a.pending[k]
		p.Completed, p.Retried, p.Dead = p.Completed+c.Completed, p.Retried+c.Retried, p.Dead+c.Dead
		a.pending[k] = p
	}
}

// process is the process row as of now.
func (a *Activity) process(now time.Time) ProcessInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := ProcessInfo{ID: a.id, Host: a.cfg.Host, PID: os.Getpid(), StartedAt: a.start, SeenAt: now}
	for _, s := range a.workers {
		p.Concurrency += s.n
		if !slices.Contains(p.Queues, s.queue) {
			p.Queues = append(p.Queues, s.queue)
		}
	}
	slices.Sort(p.Queues)
	return p
}

// JoinQueues is the stored form of a process's queues: comma-separated,
// cut at whole names to MaxProcessQueuesLen with a trailing ",…". Queue
// names hold no commas.
func JoinQueues(queues []string) string {
	s := strings.Join(queues, ",")
	if len(s) <= MaxProcessQueuesLen {
		return s
	}
	s = s[:MaxProcessQueuesLen-len(",…")]
	if i := strings.LastIndexByte(s, ','); i >= 0 {
		s = s[:i]
	}
	return s + ",…"
}

// SplitQueues reverses JoinQueues.
func SplitQueues(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// cutString cuts s to at most n bytes, at a rune boundary.
func cutString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// workerActivity is a Worker's view of its Activity: the counters of its
// queue by kind, cached so that a job costs one map lookup. Used by the
// Worker's result writer alone.
type workerActivity struct {
	a     *Activity
	queue string
	kinds map[string]*activityCounts
}

func (wa *workerActivity) count(kind string, o Outcome) {
	c := wa.kinds[kind]
	if c == nil {
		c = wa.a.counter(wa.queue, kind)
		wa.kinds[kind] = c
	}
	switch o {
	case OutcomeCompleted:
		c.completed.Add(1)
	case OutcomeRetried:
		c.retried.Add(1)
	case OutcomeDead:
		c.dead.Add(1)
	}
}

func (q *Queue) activityStore() (ActivityStore, error) {
	if q.closed.Load() {
		return nil, ErrClosed
	}
	return q.drv, nil
}

// Activity returns the completed, retried and dead jobs per queue and
// minute since since, summed over processes and kinds; see
// [ActivityStore].
func (q *Queue) Activity(ctx context.Context, since time.Time) ([]ActivityCount, error) {
	s, err := q.activityStore()
	if err != nil {
		return nil, err
	}
	return s.Activity(ctx, since.UTC().Truncate(time.Minute))
}

// Processes lists the processes whose Activity keeps a row: those running
// Workers now, and those gone (ProcessInfo.Gone) for less than
// ProcessRetention.
func (q *Queue) Processes(ctx context.Context) ([]ProcessInfo, error) {
	s, err := q.activityStore()
	if err != nil {
		return nil, err
	}
	return s.Processes(ctx)
}
