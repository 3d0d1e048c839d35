package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// Strategy is how claimers take jobs. Every worker on one table must use the
// same strategy: an advisory claimer does not see a SKIP LOCKED claimer's
// leases as held, nor the other way round.
type Strategy int

const (
	// Advisory claims hold session advisory locks: nothing is
	// written to claim a job, and a dead claimer's jobs come back the moment
	// its connection closes. Each claimer keeps one connection. The default.
	Advisory Strategy = iota
	// SkipLocked claims mark rows claimed with a lease and a token, taken
	// with FOR UPDATE SKIP LOCKED (as River and Oban do). No session state:
	// safe behind PgBouncer in transaction mode; a dead claimer's jobs come
	// back when their lease expires.
	SkipLocked
)

// String returns "advisory" or "skiplocked".
func (s Strategy) String() string {
	switch s {
	case Advisory:
		return "advisory"
	case SkipLocked:
		return "skiplocked"
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// Config configures the PostgreSQL dialect. The zero value means the
// defaults documented on queue.Config and the Advisory strategy.
type Config struct {
	queue.Config
	// Strategy picks the claimer. Default Advisory.
	Strategy Strategy
	// NoNotify turns LISTEN/NOTIFY off: enqueues send no notification and
	// workers only poll. Set it behind PgBouncer in transaction mode, where
	// a LISTEN session cannot be kept.
	NoNotify bool
	// LockCheck bounds how long a Worker takes to notice that an advisory
	// claimer's connection, and with it the locks of the jobs it runs, is
	// gone (an idle timeout, a proxy, pg_terminate_backend, a network cut):
	// while it holds jobs it pings the connection every third of LockCheck,
	// which also keeps idle timeouts from ending the session, and a ping
	// that fails or takes longer than a third ends the connection and
	// cancels the handlers of every job it held. Default 3s. Unused by
	// SkipLocked, whose leases the Worker renews every third of Lease.
	LockCheck time.Duration
}

// DefaultLockCheck is Config.LockCheck's default.
const DefaultLockCheck = 3 * time.Second

// Validate checks c after defaults. Errors wrap queue.ErrInvalidConfig or
// queue.ErrInvalidIdentifier.
func (c Config) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	if c.Strategy != Advisory && c.Strategy != SkipLocked {
		return fmt.Errorf("%w: postgres: unknown %v", queue.ErrInvalidConfig, c.Strategy)
	}
	if c.LockCheck != 0 && c.LockCheck < 3*time.Millisecond {
		return fmt.Errorf("%w: postgres: LockCheck %v < 3ms", queue.ErrInvalidConfig, c.LockCheck)
	}
	return nil
}

// DefaultMaxConns is the pool size [Open] uses when the DSN sets no
// pool_max_conns: each advisory claimer keeps one connection for its life,
// so pgx's default of max(4, CPUs) is easily too small.
const DefaultMaxConns = 16

// rescueLimit is the most expired leases one rescue statement returns to
// ready (rescue.sql).
const rescueLimit = 1000

// Driver is the PostgreSQL [queue.Driver]. Get it from a Queue with
// q.Driver().(*postgres.Driver), for example to reach [Driver.Pool] or
// [Driver.Rescue].
type Driver struct {
	pool    *pgxpool.Pool
	ownPool bool // opened by Open, closed by Close
	cfg     Config
	stmts   *statements
	log     *slog.Logger
	leaseUS int64

	lastRescue atomic.Int64 // unix nanoseconds of the last automatic rescue

	sessionChecked atomic.Bool // ownSession passed

	listener listener // LISTEN connection, started by the first Subscribe

	mu       sync.Mutex
	claimers map[*AdvisoryClaimer]struct{} // open, closed by Close
	closed   atomic.Bool

	// noPostCheck turns the advisory post-check off, for tests that show
	// what it prevents. Never set outside tests.
	noPostCheck bool
}

var _ queue.Driver = (*Driver)(nil)

// New returns a Queue over the user's pool, with cfg. Queue.Close leaves the
// pool open. An advisory claimer holds one of the pool's connections for
// its life, so size the pool for the claimers plus what producers need.
// The tables must be migrated ([Migrate], or `dbq migrate up`).
func New(pool *pgxpool.Pool, cfg Config) (*queue.Queue, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: postgres: nil pool", queue.ErrInvalidConfig)
	}
	drv, err := newDriver(pool, false, cfg)
	if err != nil {
		return nil, err
	}
	return queue.New(drv, cfg.Config)
}

// Open connects to the database dsn names (a postgres:// URL or a
// key=value string, as pgx accepts) with a pool of its own, which
// Queue.Close closes. The pool has pool_max_conns connections when the DSN
// says so, else [DefaultMaxConns]. Errors never hold the DSN's password.
func Open(ctx context.Context, dsn string, cfg Config) (*queue.Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, badDSN(dsn, err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		pc.MaxConns = max(pc.MaxConns, DefaultMaxConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("dbq: postgres: open %s: %s", dialect.Redact(dsn), dialect.Redact(err.Error()))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("dbq: postgres: connect to %s: %w", dialect.Redact(dsn), err)
	}
	drv, err := newDriver(pool, true, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	q, err := queue.New(drv, cfg.Config)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return q, nil
}

// badDSN is the error for a DSN pgx cannot parse, without its password and
// without wrapping pgx's error (which holds the parsed config).
func badDSN(dsn string, err error) error {
	return fmt.Errorf("%w: postgres: bad DSN %s: %s", queue.ErrInvalidConfig, dialect.Redact(dsn), dialect.Redact(err.Error()))
}

// OpenDB opens a *sql.DB (driver pgx/v5/stdlib) for dsn, for migrations and
// for callers that enqueue in database/sql transactions. It does not
// connect; errors never hold the DSN's password.
func OpenDB(dsn string) (*sql.DB, error) {
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, badDSN(dsn, err)
	}
	return stdlib.OpenDB(*cc), nil
}

// SQLDB returns a *sql.DB that borrows its connections from pool, for
// migrations and database/sql callers. Closing it leaves pool open.
func SQLDB(pool *pgxpool.Pool) *sql.DB { return stdlib.OpenDBFromPool(pool) }

// Migrate applies every pending migration of the job schema to the tables
// cfg names (creating cfg.Schema first when set), through pool. It needs
// DDL rights; workers and producers need only SELECT, INSERT, UPDATE and
// DELETE on the tables.
func Migrate(ctx context.Context, pool *pgxpool.Pool, cfg Config) error {
	if pool == nil {
		return fmt.Errorf("%w: postgres: nil pool", queue.ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	db := SQLDB(pool)
	defer db.Close()
	return migrations.Up(ctx, dialect.Postgres, db, cfg.Names())
}

func newDriver(pool *pgxpool.Pool, own bool, cfg Config) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Config = cfg.Config.WithDefaults()
	if cfg.LockCheck == 0 {
		cfg.LockCheck = DefaultLockCheck
	}
	stmts, err := loadStatements(cfg.Names())
	if err != nil {
		return nil, err
	}
	return &Driver{
		pool:     pool,
		ownPool:  own,
		cfg:      cfg,
		stmts:    stmts,
		log:      cfg.Logger,
		leaseUS:  cfg.Lease.Microseconds(),
		claimers: map[*AdvisoryClaimer]struct{}{},
	}, nil
}

// Dialect returns "postgres".
func (d *Driver) Dialect() string { return string(dialect.Postgres) }

// Pool returns the driver's pool: the user's for New, its own for Open.
func (d *Driver) Pool() *pgxpool.Pool { return d.pool }

// Strategy returns the configured claim strategy.
func (d *Driver) Strategy() Strategy { return d.cfg.Strategy }

// Table returns the quoted, qualified name of the jobs table.
func (d *Driver) Table() string { return d.stmts.table }

// NewClaimer returns an *AdvisoryClaimer, which takes one connection from
// the pool and keeps it until Close, or a *SkipLockedClaimer, which borrows
// a connection per call.
func (d *Driver) NewClaimer(ctx context.Context) (queue.Claimer, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, ctxErr("new claimer", ctx)
	}
	if d.cfg.Strategy == SkipLocked {
		return newSkipLockedClaimer(d), nil
	}
	c := newAdvisoryClaimer(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	if err := d.ownSession(ctx, c.pid); err != nil {
		c.dropConn()
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		c.dropConn()
		return nil, queue.ErrClosed
	}
	d.claimers[c] = struct{}{}
	return c, nil
}

// sessionProbeWait bounds the wait for a second pool connection in
// ownSession.
const sessionProbeWait = 2 * time.Second

// ownSession refuses, with queue.ErrUnsupportedServer and the setup to use
// instead, a pool whose connections do not each have a session of their
// own: a transaction pooler (PgBouncer with pool_mode = transaction) hands
// one client connection's statements to any server connection, and the
// advisory locks taken through it land in sessions other clients then use
// (1,243 jobs of 3,000 ran twice that way). pid is the server process the
// claimer's connection reached; a second connection of the pool that
// reaches the same one shares sessions. Such a pooler reuses the server
// connection a client just left, so the probe finds it; where it does not
// (a pool with no connection to spare, other pooler settings), the session
// guard in every statement of the claimer still stops the first one that
// runs elsewhere, before it takes, checks or releases a lock. Passed once
// per Driver.
func (d *Driver) ownSession(ctx context.Context, pid int32) error {
	if d.sessionChecked.Load() {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, sessionProbeWait)
	defer cancel()
	conn, err := d.pool.Acquire(actx)
	if err != nil {
		if ctx.Err() != nil {
			return ctxErr("new claimer", ctx)
		}
		return nil // no connection to spare: the session guard stands alone
	}
	defer conn.Release()
	var other int32
	if err := conn.QueryRow(actx, "SELECT pg_backend_pid()").Scan(&other); err != nil {
		return interpret("check the session", err)
	}
	if other == pid {
		return fmt.Errorf("%w: postgres: two connections of the pool reached the same server process %d; %s",
			queue.ErrUnsupportedServer, pid, adviceAdvisory)
	}
	d.sessionChecked.Store(true)
	return nil
}

func (d *Driver) forget(c *AdvisoryClaimer) {
	d.mu.Lock()
	delete(d.claimers, c)
	d.mu.Unlock()
}

// Stats counts jobs per queue, ordered by name. Jobs an advisory claimer
// holds are found in pg_locks and counted as Held, like claimed rows.
func (d *Driver) Stats(ctx context.Context) ([]queue.QueueStats, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	rows, err := d.pool.Query(ctx, d.stmts.stats)
	if err != nil {
		return nil, interpret("stats", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (queue.QueueStats, error) {
		var s queue.QueueStats
		err := r.Scan(&s.Queue, &s.Ready, &s.Scheduled, &s.Held, &s.Dead, &s.OldestReadyAge, &s.Paused)
		return s, err
	})
	if err != nil {
		return nil, interpret("stats", err)
	}
	return out, nil
}

// Rescue returns every expired lease to ready (in statements of at most
// 1000 rows) and says how many it returned. SKIP LOCKED claimers run one
// such statement on their own at most every quarter lease, so calling it is
// only needed to make jobs claimable (and counted as ready) sooner. It is a
// no-op for the Advisory strategy, whose claims end with their connection.
func (d *Driver) Rescue(ctx context.Context) (int, error) {
	if d.closed.Load() {
		return 0, queue.ErrClosed
	}
	total := 0
	for {
		n, err := d.rescueOnce(ctx)
		total += n
		if err != nil || n < rescueLimit {
			return total, err
		}
	}
}

func (d *Driver) rescueOnce(ctx context.Context) (int, error) {
	ids, err := queryIDs(ctx, d.pool, d.stmts.rescue, d.stmts.rescueKey)
	if err != nil {
		return 0, interpret("rescue", err)
	}
	d.lastRescue.Store(time.Now().UnixNano())
	return len(ids), nil
}

// maybeRescue runs one rescue statement when none has run for a quarter
// lease, so expired leases come back without a separate process.
func (d *Driver) maybeRescue(ctx context.Context) error {
	last := d.lastRescue.Load()
	now := time.Now().UnixNano()
	if now-last < int64(d.cfg.Lease/4) || !d.lastRescue.CompareAndSwap(last, now) {
		return nil
	}
	n, err := d.rescueOnce(ctx)
	if n > 0 {
		d.log.Debug("dbq: returned expired leases to ready", "jobs", n)
	}
	return err
}

// Close closes the claimers still open, giving back their jobs, and then
// the pool if Open made it. A pool passed to New stays open.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.mu.Lock()
	open := make([]*AdvisoryClaimer, 0, len(d.claimers))
	for c := range d.claimers {
		open = append(open, c)
	}
	d.mu.Unlock()
	d.listener.close()
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	for _, c := range open {
		if err := c.Close(ctx); err != nil && !errors.Is(err, queue.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if d.ownPool {
		d.pool.Close()
	}
	return errors.Join(errs...)
}
