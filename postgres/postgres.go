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
	"unicode"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/queue"
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

// ParseStrategy returns the strategy name names, as String spells it:
// "advisory" or "skiplocked", in any case and with any '-' or '_' (so
// "skip_locked" too). "" is Advisory, the default. Another name is an
// error wrapping queue.ErrInvalidConfig.
func ParseStrategy(name string) (Strategy, error) {
	key := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' {
			return -1
		}
		return unicode.ToLower(r)
	}, name)
	for _, s := range []Strategy{Advisory, SkipLocked} {
		if key == s.String() {
			return s, nil
		}
	}
	if key == "" {
		return Advisory, nil
	}
	return Advisory, fmt.Errorf("%w: postgres has no claim strategy %q (want %s or %s)",
		queue.ErrInvalidConfig, name, Advisory, SkipLocked)
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
	// HorizonWarn is how long a session or prepared transaction may hold
	// the MVCC horizon back before the "horizon" probe of queue.Check
	// (dbq check) fails: while it is held, vacuum cannot remove the dead
	// rows of completed jobs. Default 5m ([DefaultHorizonWarn]).
	HorizonWarn time.Duration
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
	if c.HorizonWarn < 0 {
		return fmt.Errorf("%w: postgres: HorizonWarn %v < 0", queue.ErrInvalidConfig, c.HorizonWarn)
	}
	return nil
}

// Driver is the PostgreSQL [queue.Driver]. Get it from a Queue with
// q.Driver().(*postgres.Driver), for example to reach [Driver.Pool] or
// [Driver.Rescue].
type Driver struct {
	pool    *pgxpool.Pool
	ownPool bool // opened by Open, closed by Close
	cfg     Config
	stmts   *statements
	move    *moveStatements
	log     *slog.Logger
	leaseUS int64

	lastRescue atomic.Int64 // unix nanoseconds of the last automatic rescue

	sessionChecked  atomic.Bool // ownSession passed
	preparedChecked atomic.Bool // preparedSurvive passed

	listener listener // LISTEN connection, started by the first Subscribe

	mu       sync.Mutex
	claimers map[*AdvisoryClaimer]struct{} // open, closed by Close

	fronts fronts // where this process's advisory claimers locked last, per queue
	closed atomic.Bool

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
	pc, ds, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, ds.ConnectError(err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, ds.ConnectError(err)
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

// OpenDB opens a *sql.DB (driver pgx/v5/stdlib) for dsn, for migrations and
// for callers that enqueue in database/sql transactions. It does not
// connect; errors never hold the DSN's password.
func OpenDB(dsn string) (*sql.DB, error) {
	pc, _, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return stdlib.OpenDB(*pc.ConnConfig), nil
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
	if cfg.HorizonWarn == 0 {
		cfg.HorizonWarn = DefaultHorizonWarn
	}
	stmts, err := loadStatements(cfg.Names())
	if err != nil {
		return nil, err
	}
	move, err := loadMoveStatements(cfg.Names())
	if err != nil {
		return nil, err
	}
	return &Driver{
		pool:     pool,
		ownPool:  own,
		cfg:      cfg,
		stmts:    stmts,
		move:     move,
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

func (d *Driver) forget(c *AdvisoryClaimer) {
	d.mu.Lock()
	delete(d.claimers, c)
	d.mu.Unlock()
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
