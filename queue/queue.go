package queue

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbq/dialect"
)

// Defaults for [Config] fields left zero.
const (
	DefaultMaxPayloadBytes  = 1 << 20
	DefaultMaxAttempts      = 25
	DefaultLease            = 5 * time.Minute
	DefaultClaimConcurrency = 4
)

// Config holds the knobs every dialect shares. Dialects embed it in their own
// Config. The zero value means the defaults documented on each field.
type Config struct {
	// Schema holds the tables: a PostgreSQL or SQL Server schema, a MySQL
	// database. Default: the connection's own. Ignored by SQLite.
	Schema string
	// Prefix starts every table name. Default "dbq_" (table dbq_jobs).
	Prefix string
	// MaxPayloadBytes bounds a payload. Default 1 MiB.
	MaxPayloadBytes int
	// MaxAttempts is the runs a job gets when its NewJob says 0. Default 25.
	MaxAttempts int
	// Lease is how long a lease-based claim lasts without Extend. Default
	// 5 minutes. Unused by lock-based claims.
	Lease time.Duration
	// Logger receives the library's logs. Default: slog.Default().
	Logger *slog.Logger
	// ClaimConcurrency is how many claims the Workers of this Queue run at
	// once on one queue name; the others wait their turn. Claims on one
	// queue compete for the same rows at the head of its index, and past a
	// few at once they spend their time stepping over each other's locks
	// (on PostgreSQL the plain SKIP LOCKED loop does 146,000 jobs/s with 4
	// connections and 29,000 with 64). Workers in other processes are not
	// counted. Default 4; -1 for no limit.
	ClaimConcurrency int
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = dialect.DefaultPrefix
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ClaimConcurrency == 0 {
		c.ClaimConcurrency = DefaultClaimConcurrency
	}
	return c
}

// Validate checks c after defaults. Errors wrap ErrInvalidConfig or
// ErrInvalidIdentifier.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if err := c.Names().Validate(); err != nil {
		return err
	}
	switch {
	case c.MaxPayloadBytes < 0:
		return fmt.Errorf("%w: MaxPayloadBytes %d < 0", ErrInvalidConfig, c.MaxPayloadBytes)
	case c.MaxAttempts < 1:
		return fmt.Errorf("%w: MaxAttempts %d < 1", ErrInvalidConfig, c.MaxAttempts)
	case c.Lease < time.Millisecond:
		return fmt.Errorf("%w: Lease %v < 1ms", ErrInvalidConfig, c.Lease)
	case c.ClaimConcurrency < -1:
		return fmt.Errorf("%w: ClaimConcurrency %d (want > 0, or -1 for no limit)", ErrInvalidConfig, c.ClaimConcurrency)
	}
	return nil
}

// Names returns the schema and prefix as dialect names.
func (c Config) Names() dialect.Names {
	return dialect.Names{Schema: c.Schema, Prefix: c.Prefix}.WithDefaults()
}

// Queue is a job table in one database: it enqueues jobs, hands out
// claimers, counts jobs and runs workers. A dialect's New returns one.
// A Queue is safe for concurrent use.
type Queue struct {
	drv    Driver
	cfg    Config
	closed atomic.Bool

	claimMu    sync.Mutex
	claimSlots map[string]chan struct{} // per queue name; see ClaimConcurrency
}

// claimSlot returns the semaphore that bounds concurrent claims on queue
// name, or nil when they are not bounded.
func (q *Queue) claimSlot(name string) chan struct{} {
	if q.cfg.ClaimConcurrency < 0 {
		return nil
	}
	q.claimMu.Lock()
	defer q.claimMu.Unlock()
	s := q.claimSlots[name]
	if s == nil {
		if q.claimSlots == nil {
			q.claimSlots = map[string]chan struct{}{}
		}
		s = make(chan struct{}, q.cfg.ClaimConcurrency)
		q.claimSlots[name] = s
	}
	return s
}

// New returns a Queue over drv. Dialect constructors call it; users call the
// dialect's New (postgres.New, sqlite.Open, …).
func New(drv Driver, cfg Config) (*Queue, error) {
	if drv == nil {
		return nil, fmt.Errorf("%w: nil driver", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Queue{drv: drv, cfg: cfg.WithDefaults()}, nil
}

// Config returns the queue's configuration, defaults applied.
func (q *Queue) Config() Config { return q.cfg }

// Driver returns the dialect driver underneath.
func (q *Queue) Driver() Driver { return q.drv }

// Dialect names the database.
func (q *Queue) Dialect() string { return q.drv.Dialect() }

// Enqueue stores jobs atomically — all or none — in its own transaction and
// returns their IDs in order.
func (q *Queue) Enqueue(ctx context.Context, jobs ...NewJob) ([]int64, error) {
	return q.EnqueueTx(ctx, nil, jobs...)
}

// EnqueueTx stores jobs in the caller's transaction tx, so they become
// visible when, and only if, it commits. The PostgreSQL dialect accepts a
// pgx.Tx or *sql.Tx; the others a *sql.Tx. A nil tx is Enqueue.
func (q *Queue) EnqueueTx(ctx context.Context, tx any, jobs ...NewJob) ([]int64, error) {
	if q.closed.Load() {
		return nil, ErrClosed
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	checked := make([]NewJob, len(jobs))
	for i, j := range jobs {
		if err := q.check(&j); err != nil {
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
		checked[i] = j
	}
	return q.drv.Enqueue(ctx, tx, checked)
}

func (q *Queue) check(j *NewJob) error {
	if err := dialect.ValidateQueue(j.Queue); err != nil {
		return err
	}
	if j.Kind != "" {
		if err := ValidateKind(j.Kind); err != nil {
			return err
		}
	}
	if len(j.Payload) > q.cfg.MaxPayloadBytes {
		return fmt.Errorf("%w: %d bytes > limit %d", ErrPayloadTooLarge, len(j.Payload), q.cfg.MaxPayloadBytes)
	}
	if j.Payload == nil {
		j.Payload = []byte{}
	}
	if j.MaxAttempts == 0 {
		j.MaxAttempts = q.cfg.MaxAttempts
	}
	if j.MaxAttempts < 1 || j.MaxAttempts > 1<<20 {
		return fmt.Errorf("%w: MaxAttempts %d out of range 1..%d", ErrInvalidJob, j.MaxAttempts, 1<<20)
	}
	if j.Delay < 0 {
		return fmt.Errorf("%w: negative Delay %v", ErrInvalidJob, j.Delay)
	}
	if len(j.DedupeKey) > 200 {
		return fmt.Errorf("%w: DedupeKey longer than 200 bytes", ErrInvalidJob)
	}
	return nil
}

// NewClaimer returns a claimer with its own connection. Close it when done.
func (q *Queue) NewClaimer(ctx context.Context) (Claimer, error) {
	if q.closed.Load() {
		return nil, ErrClosed
	}
	return q.drv.NewClaimer(ctx)
}

// Stats counts jobs per queue, ordered by queue name.
func (q *Queue) Stats(ctx context.Context) ([]QueueStats, error) {
	if q.closed.Load() {
		return nil, ErrClosed
	}
	return q.drv.Stats(ctx)
}

// Close closes the driver. Claimers and workers must be stopped first.
// Further calls on the Queue return ErrClosed.
func (q *Queue) Close() error {
	if q.closed.Swap(true) {
		return nil
	}
	return q.drv.Close()
}
