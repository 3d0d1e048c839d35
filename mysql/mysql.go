package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/queue"
	mysqldrv "github.com/go-sql-driver/mysql"
)

// Defaults for the MySQL-specific [Config] fields.
const (
	DefaultMaxSpread       = 32
	DefaultRescueBatch     = 1000
	DefaultLockWaitTimeout = 5 * time.Second
)

// Config configures the MySQL dialect. The zero value means the documented
// defaults.
type Config struct {
	queue.Config

	// Replica, when set, serves the candidate select of every claim (step 1
	// of the claim, the only step that takes no lock). A lagging replica only
	// proposes stale candidates, which the locking step on the primary
	// re-checks and skips; it never makes a claim wrong. Default: none, the
	// primary serves it. The caller owns and closes it.
	Replica *sql.DB

	// MaxSpread bounds how far a claimer spreads its claims under
	// contention: its candidate window is between n and MaxSpread·n ready
	// jobs in claim order, and it locks n of them, in a few runs of
	// consecutive candidates picked at random. A claimer starts at a
	// spread of 1 (exact claim order) and widens it while other claimers
	// take the rows it picked. 1 turns spreading off: every claimer then
	// reads the same first n candidates, the original loop taken literally, which
	// collapses beyond a few claimers. Default 32.
	MaxSpread int

	// RescueBatch is the most expired leases one rescue pass gives back.
	// Claim runs at most one pass every Lease/4 per Queue. Default 1000.
	RescueBatch int

	// LockWaitTimeout is innodb_lock_wait_timeout, in whole seconds (at
	// least 1), for each claimer's own session and, with Open, for every
	// session of the pool (with New the pool's sessions keep theirs).
	// Claims never wait on a row lock (SKIP LOCKED); Complete, Retry,
	// Release and Extend wait at most this long for a claim or rescue
	// that is looking at the same row. Default 5s.
	LockWaitTimeout time.Duration
}

func (c Config) withDefaults() Config {
	c.Config = c.Config.WithDefaults()
	if c.MaxSpread == 0 {
		c.MaxSpread = DefaultMaxSpread
	}
	if c.RescueBatch == 0 {
		c.RescueBatch = DefaultRescueBatch
	}
	if c.LockWaitTimeout == 0 {
		c.LockWaitTimeout = DefaultLockWaitTimeout
	}
	return c
}

func (c Config) validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	c = c.withDefaults()
	switch {
	case c.MaxSpread < 1 || c.MaxSpread > 1024:
		return fmt.Errorf("%w: MaxSpread %d out of range 1..1024", queue.ErrInvalidConfig, c.MaxSpread)
	case c.RescueBatch < 1 || c.RescueBatch > maxList:
		return fmt.Errorf("%w: RescueBatch %d out of range 1..%d", queue.ErrInvalidConfig, c.RescueBatch, maxList)
	case c.LockWaitTimeout < time.Second:
		return fmt.Errorf("%w: LockWaitTimeout %v < 1s", queue.ErrInvalidConfig, c.LockWaitTimeout)
	}
	return nil
}

// maxList bounds the ids of one IN list: one claim, one acknowledgement
// statement, one rescue pass.
const maxList = 5000

// Driver is the MySQL [queue.Driver] and [queue.Admin]. Get it from a Queue
// with q.Driver().(*mysql.Driver) for what only this dialect has:
// [Driver.Server], [Driver.Rescue], [Driver.EmptyLocks].
type Driver struct {
	db      *sql.DB
	replica *sql.DB
	own     bool // db was opened by Open and is closed by Close
	cfg     Config
	log     *slog.Logger
	server  Server
	stmts   *statements
	// claimers counts the live Claimers, each holding a connection of db.
	claimers atomic.Int64

	emptyLocks atomic.Int64
	claims     atomic.Int64
	retried    atomic.Int64 // retryable errors retried (deadlocks, lock waits)
	conflicts  atomic.Int64 // Galera certification conflicts claims retried at once
	// trackTokens makes claimers record their tokens (tests).
	trackTokens bool
	// readBack: claims read their rows back by token even when their
	// UPDATE changed every row they locked, because the server's locks
	// never hold (TiDB), so what the locking read saw may be stale.
	readBack bool
	// idsByMarker: Enqueue finds its ids by a per-batch marker rather than
	// deriving them from LAST_INSERT_ID() (innodb_autoinc_lock_mode 2).
	idsByMarker bool
	epoch       time.Time
	lastRescue  sync.Map // queue -> *atomic.Int64: its last rescue pass, ns after epoch (0: none yet)
	// rescueLock names the GET_LOCK that makes one session at a time
	// rescue this table (see rescueLockName).
	rescueLock string
	noLockOnce sync.Once // logs that the server refuses GET_LOCK
	// inRescue, when set (tests), runs while a rescue holds the lock.
	inRescue func()
	closed   atomic.Bool
}

var _ queue.Driver = (*Driver)(nil)

// New returns a Queue over the user's db, which stays the caller's to close.
// db must come from github.com/go-sql-driver/mysql; any DSN works —
// parseTime and loc do not matter, since the dialect reads and writes times
// as UTC wall clock itself — but interpolateParams=true halves the round
// trips. New asks the server its version (logging it) and fails with
// ErrUnsupportedServer below MySQL 8.0.1 / MariaDB 10.6.
func New(db *sql.DB, cfg Config) (*queue.Queue, error) {
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	return newQueue(ctx, db, cfg, false)
}

func newQueue(ctx context.Context, db *sql.DB, cfg Config, own bool) (*queue.Queue, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", queue.ErrInvalidConfig)
	}
	d, err := newDriver(ctx, db, cfg, own)
	if err != nil {
		return nil, err
	}
	q, err := queue.New(d, d.cfg.Config)
	if err != nil {
		return nil, err
	}
	return q, nil
}

func newDriver(ctx context.Context, db *sql.DB, cfg Config, own bool) (*Driver, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	stmts, err := newStatements(cfg.Names(), int(cfg.LockWaitTimeout/time.Second))
	if err != nil {
		return nil, err
	}
	d := &Driver{
		db: db, replica: cfg.Replica, own: own, cfg: cfg, log: cfg.Logger,
		stmts: stmts, epoch: time.Now(),
	}
	var database string
	if d.server, database, err = readServer(ctx, db, stmts); err != nil {
		return nil, err
	}
	d.stmts.base.CandidateIsolation = d.server.candidateIsolation() // before any claimer renders session.sql
	d.readBack = d.server.Flavor == TiDB
	if n := cfg.Names(); n.Schema != "" {
		database = n.Schema
	}
	d.rescueLock = rescueLockName(database, cfg.Names().Jobs())
	d.idsByMarker = d.server.AutoincLockMode >= 2
	ids := "LAST_INSERT_ID() + i*auto_increment_increment"
	if d.idsByMarker {
		ids = "re-selected by a per-batch marker"
	}
	d.log.Info("dbq: mysql dialect", "server", d.server.String(), "version", d.server.Version,
		"table", stmts.jobsTable, "innodb_autoinc_lock_mode", d.server.AutoincLockMode,
		"enqueue_ids", ids, "replica", cfg.Replica != nil, "candidate_isolation", d.server.candidateIsolation())
	return d, nil
}

// Open connects to the MySQL or MariaDB server named by dsn, in either the
// CLI's form mysql://user:pass@host:3306/db?params or the driver's own
// user:pass@tcp(host:3306)/db?params, and returns a Queue whose Close
// closes the connection pool. Open sets what the dialect wants on every
// session: parseTime, loc=UTC, interpolateParams (one round trip per
// statement), rejectReadOnly (a failed-over primary turned replica is
// dropped, not written to), READ COMMITTED and innodb_lock_wait_timeout.
// These are the pool's own settings, made by the driver as each session
// opens; the dialect changes no session afterwards, and its transactions
// set their isolation level themselves rather than rely on these. Errors
// never hold the password.
func Open(ctx context.Context, dsn string, cfg Config) (*queue.Queue, error) {
	mc, ds, err := driverConfig(dsn)
	if err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	// A first connection tells which server this is, and so which variable
	// sets the isolation level in the DSN.
	probe := sql.OpenDB(mustConnector(mc))
	stmts, err := newStatements(cfg.Names(), int(cfg.LockWaitTimeout/time.Second))
	if err != nil {
		probe.Close()
		return nil, err
	}
	srv, _, err := readServer(ctx, probe, stmts)
	probe.Close()
	if err != nil {
		return nil, ds.ConnectError(err)
	}
	mc.Params[srv.isolationVar()] = "'READ-COMMITTED'"
	mc.Params["innodb_lock_wait_timeout"] = strconv.Itoa(int(cfg.LockWaitTimeout / time.Second))
	db := sql.OpenDB(mustConnector(mc))
	db.SetMaxIdleConns(64)
	db.SetConnMaxIdleTime(5 * time.Minute)
	db.SetConnMaxLifetime(time.Hour)
	d, err := newDriver(ctx, db, cfg, true)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%w (dsn %s)", err, ds)
	}
	q, err := queue.New(d, d.cfg.Config)
	if err != nil {
		db.Close()
		return nil, err
	}
	return q, nil
}

// OpenDB returns a *sql.DB for dsn, in either form Open takes, with Open's
// session settings except the isolation level (which needs the server's
// flavour), for migrations and for callers that enqueue in their own
// database/sql transactions. It does not connect; errors never hold the
// password.
func OpenDB(dsn string) (*sql.DB, error) {
	mc, _, err := driverConfig(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(mustConnector(mc)), nil
}

func mustConnector(mc *mysqldrv.Config) driver.Connector {
	c, err := mysqldrv.NewConnector(mc)
	if err != nil {
		// interpolateParams refuses a few multibyte collations; run without
		// it then.
		mc = mc.Clone()
		mc.InterpolateParams = false
		c, err = mysqldrv.NewConnector(mc)
		if err != nil {
			panic(err) // NewConnector only fails on what ParseDSN accepted
		}
	}
	return c
}

// Migrate applies the job schema's pending migrations for cfg's schema and
// prefix to db (goose, embedded; each migration statement runs on its own,
// so the DSN needs no multiStatements). It needs DDL rights.
func Migrate(ctx context.Context, db *sql.DB, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	return migrations.Up(ctx, dialect.MySQL, db, cfg.Config.Names())
}

// Dialect returns "mysql".
func (d *Driver) Dialect() string { return string(dialect.MySQL) }

// Server returns the server New found: flavor, version, and the settings
// the dialect depends on.
func (d *Driver) Server() Server { return d.server }

// DB returns the connection pool the driver runs on.
func (d *Driver) DB() *sql.DB { return d.db }

// EmptyLocks counts, over every claimer of this driver, the claim attempts
// that found candidates but locked none of them because other claimers
// held or had just taken them all. Claims counts every claim attempt that
// found candidates. A rising EmptyLocks/Claims ratio measures
// over-concurrency: more claimers than the queue has ready jobs for.
func (d *Driver) EmptyLocks() (empty, claims int64) { return d.emptyLocks.Load(), d.claims.Load() }

// Conflicts counts, over every claimer of this driver, the claim attempts
// that lost a Galera certification conflict (another node's claim
// committed the same rows first) and were retried at once. Compare it with
// the claims of EmptyLocks: conflicts per claim measure how often claimers
// on different nodes pick the same rows. Always 0 off Galera.
func (d *Driver) Conflicts() int64 { return d.conflicts.Load() }

// Close closes the pool if Open made it; a *sql.DB passed to New stays
// open. Claimers must be closed first.
func (d *Driver) Close() error {
	if d.closed.Swap(true) || !d.own {
		return nil
	}
	return d.db.Close()
}

// conn is what both *sql.DB and *sql.Conn offer.
type conn interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// beginRC starts a READ COMMITTED transaction: the driver sends SET
// TRANSACTION ISOLATION LEVEL READ COMMITTED, which applies to the next
// transaction only, then START TRANSACTION. It never relies on the
// session's level: a session of the user's pool is at whatever level the
// user left it, and the dialect changes no session's level (portable too:
// MariaDB and MySQL name the session variable differently, the statement
// is the same).
func beginRC(ctx context.Context, c conn) (*sql.Tx, error) {
	return c.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
}

// retry runs fn until it succeeds, fails for good, or maxRetries
// retryable errors (deadlock, lock wait timeout) have passed, sleeping a
// jittered, growing pause between tries.
func (d *Driver) retry(ctx context.Context, fn func() error) error {
	var err error
	for attempt := 0; ; attempt++ {
		err = fn()
		if err == nil || !dialect.IsRetryable(err) || attempt >= maxRetries {
			return err
		}
		d.retried.Add(1)
		d.log.Debug("dbq: mysql: retrying", "err", err, "attempt", attempt+1)
		if werr := sleepJitter(ctx, attempt); werr != nil {
			return errors.Join(err, werr)
		}
	}
}

const maxRetries = 5

func anys(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// truncateError makes s valid UTF-8 (the column is utf8mb4 text) and cuts
// it to queue.MaxErrorBytes on a character boundary.
func truncateError(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= queue.MaxErrorBytes {
		return s
	}
	cut := queue.MaxErrorBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
