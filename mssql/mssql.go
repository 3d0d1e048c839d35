package mssql

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/queue"
	mssqldb "github.com/microsoft/go-mssqldb"
)

// Strategy picks the claim statement.
type Strategy int

const (
	// DeleteTop is the default: DELETE TOP (n) ... WITH (NOWAIT, ROWLOCK)
	// of a random pick among the first Window ready rows (the randomized top-X pick of SQL Server archiving agents). A
	// claimer that meets a row another claimer is taking fails at once with
	// error 1222 and picks again.
	DeleteTop Strategy = iota
	// UpdLock claims the first n ready rows in claim order that no one else
	// has locked, WITH (UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK), as
	// Hangfire, Rebus and NServiceBus do. It is here for comparison; both are crash-safe the
	// same way.
	UpdLock
)

func (s Strategy) String() string {
	switch s {
	case DeleteTop:
		return "deletetop"
	case UpdLock:
		return "updlock"
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// ParseStrategy returns the Strategy name names, as String spells it, in
// any case and with '-' and '_' ignored: "deletetop" or "updlock"; ""
// is DeleteTop, the default. Any other name is an error wrapping
// queue.ErrInvalidConfig.
func ParseStrategy(name string) (Strategy, error) {
	switch strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(name)) {
	case "", DeleteTop.String():
		return DeleteTop, nil
	case UpdLock.String():
		return UpdLock, nil
	}
	return DeleteTop, fmt.Errorf("%w: mssql has no claim strategy %q (want %s or %s)",
		queue.ErrInvalidConfig, name, DeleteTop, UpdLock)
}

// Defaults and limits for [Config] fields.
const (
	DefaultClaimers      = 10
	DefaultClaimAttempts = 5
	// WindowPerClaimer is the Window per expected claimer: X ≈ 100·N.
	WindowPerClaimer = 100
	// MaxWindow bounds Window: every claim reads and sorts that many rows.
	MaxWindow = 100_000
	// MaxClaim is the most jobs one Claim takes; a larger n gets at most
	// this many. With RescueBatch and the lease batches it keeps every
	// statement far below the 5,000 locks at which SQL Server escalates.
	MaxClaim = 1000
	// RescueBatch is the most expired leases one rescue statement moves.
	RescueBatch = 1000
)

// Config configures the SQL Server dialect. The zero value means the
// defaults documented on each field.
type Config struct {
	queue.Config

	// Claimers is how many claimers are expected to run at once on one
	// queue, across all processes. It only sizes the default Window.
	// Default 10.
	Claimers int
	// Window is the X of the top-X pick: a DeleteTop claim picks its jobs
	// at random among the first Window ready jobs in claim order, so that
	// concurrent claimers rarely pick the same row; a claim for more than
	// Window jobs reads n rows instead. Larger means fewer collisions (error 1222) and
	// looser order; every claim reads and sorts this many rows. Default
	// 100 × Claimers, at most MaxWindow. Unused by UpdLock.
	Window int
	// Strategy picks the claim statement. Default DeleteTop.
	Strategy Strategy
	// ClaimAttempts bounds how often one Claim runs its statement when it
	// meets a locked row (error 1222) or is chosen as a deadlock victim
	// (1205), with a short random pause between runs; Complete, Retry,
	// Release and Extend rerun a deadlock victim as often. When all fail,
	// the error is one queue.IsRetryable reports. Default 5.
	ClaimAttempts int
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Config = c.Config.WithDefaults()
	if c.Claimers == 0 {
		c.Claimers = DefaultClaimers
	}
	if c.Window == 0 {
		c.Window = min(WindowPerClaimer*max(c.Claimers, 1), MaxWindow)
	}
	if c.ClaimAttempts == 0 {
		c.ClaimAttempts = DefaultClaimAttempts
	}
	return c
}

// Validate checks c after defaults. Errors wrap queue.ErrInvalidConfig or
// queue.ErrInvalidIdentifier.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if err := c.Config.Validate(); err != nil {
		return err
	}
	switch {
	case c.Claimers < 1:
		return fmt.Errorf("%w: Claimers %d < 1", queue.ErrInvalidConfig, c.Claimers)
	case c.Window < 1 || c.Window > MaxWindow:
		return fmt.Errorf("%w: Window %d not in 1..%d", queue.ErrInvalidConfig, c.Window, MaxWindow)
	case c.Strategy != DeleteTop && c.Strategy != UpdLock:
		return fmt.Errorf("%w: unknown %v", queue.ErrInvalidConfig, c.Strategy)
	case c.ClaimAttempts < 1 || c.ClaimAttempts > 100:
		return fmt.Errorf("%w: ClaimAttempts %d not in 1..100", queue.ErrInvalidConfig, c.ClaimAttempts)
	}
	return nil
}

// Driver is the SQL Server queue.Driver. [New] and [Open] wrap one in a
// *queue.Queue; reach it with q.Driver().(*mssql.Driver) to call [Driver.Rescue].
type Driver struct {
	db     *sql.DB
	ownDB  bool
	cfg    Config
	sql    *statements  // sql/*.sql
	move   *statements  // sql/move/*.sql
	bf     *statements  // sql/babelfish/*.sql
	server atomic.Int32 // serverUnknown, serverSQLServer or serverBabelfish
	dedupe string       // the dedupe table's name, as it appears in error messages
	pause  pauseFunc
	// rescueLock names the application lock that lets one rescue pass at a
	// time run over this jobs_inflight table.
	rescueLock string

	// trackTokens makes claimers record their tokens (tests).
	trackTokens bool

	lastRescue atomic.Int64 // unix nanoseconds of the last rescue from Claim
	closed     atomic.Bool
}

var _ queue.Driver = (*Driver)(nil)

// New returns a Queue over the tables cfg names in db, a go-mssqldb
// database ("sqlserver" driver). The caller keeps db and closes it after
// the Queue. Create the tables first with [Migrate].
func New(db *sql.DB, cfg Config) (*queue.Queue, error) {
	return newQueue(db, false, cfg)
}

func newQueue(db *sql.DB, own bool, cfg Config) (*queue.Queue, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB", queue.ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	names := cfg.Names()
	stmts, err := loadStatements(sqlPattern, names)
	if err != nil {
		return nil, err
	}
	move, err := loadStatements(movePattern, names)
	if err != nil {
		return nil, err
	}
	bf, err := loadStatements(babelfishPattern, names)
	if err != nil {
		return nil, err
	}
	d := &Driver{
		db: db, ownDB: own, cfg: cfg, sql: stmts, move: move, bf: bf,
		dedupe:     names.Prefix + "jobs_dedupe",
		pause:      jitterPause,
		rescueLock: lockResource("rescue", names.Qualified(dialect.MSSQL, names.Prefix+"jobs_inflight")),
	}
	return queue.New(d, cfg.Config)
}

// Open connects to the SQL Server dsn names, in any form [OpenDB] takes,
// and returns a Queue over the tables cfg names; closing the Queue closes the
// connections. Errors never hold the DSN's password.
func Open(ctx context.Context, dsn string, cfg Config) (*queue.Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c, ds, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(mssqldb.NewConnectorConfig(c))
	// Claimers share the pool; keep enough idle connections for them.
	db.SetMaxIdleConns(cfg.WithDefaults().Claimers + 2)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, ds.ConnectError(err)
	}
	q, err := newQueue(db, true, cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	return q, nil
}

// OpenDB returns a *sql.DB for a SQL Server DSN without connecting: a
// sqlserver:// URL, an ADO connection string that names the server
// (server=h;user id=u;password=p;database=d) or go-mssqldb's odbc: form.
// Errors never hold the DSN's password.
func OpenDB(dsn string) (*sql.DB, error) {
	c, _, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(mssqldb.NewConnectorConfig(c)), nil
}

// Migrate creates or updates the tables cfg names in db. It needs DDL
// rights; see package migrations.
func Migrate(ctx context.Context, db *sql.DB, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	return migrations.Up(ctx, dialect.MSSQL, db, cfg.Names())
}

// Dialect returns "mssql".
func (d *Driver) Dialect() string { return string(dialect.MSSQL) }

// Config returns the driver's configuration, defaults applied.
func (d *Driver) Config() Config { return d.cfg }

// Close closes the *sql.DB if Open made it. Claimers and Rescue then
// return queue.ErrClosed.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	if d.ownDB {
		return d.db.Close()
	}
	return nil
}

// NewClaimer returns a claimer. Its claims are leases in the database, not
// sessions, so it shares the pool.
func (d *Driver) NewClaimer(ctx context.Context) (queue.Claimer, error) {
	c := &Claimer{d: d, held: map[int64]int64{}}
	if d.trackTokens {
		c.issued = map[int64]bool{}
	}
	return c, nil
}

// named is the bind parameter @name<i>.
func named(name string, i int, v any) sql.NamedArg {
	return sql.Named(fmt.Sprintf("%s%d", name, i), v)
}

// splitDuration splits d into whole seconds and milliseconds for
// DATEADD(millisecond, ms, DATEADD(second, s, ...)), whose numbers are int:
// one DATEADD in milliseconds would stop at 24.8 days. Negative is zero.
func splitDuration(d time.Duration) (s, ms int32) {
	if d <= 0 {
		return 0, 0
	}
	secs := min(d/time.Second, math.MaxInt32)
	return int32(secs), int32((d % time.Second) / time.Millisecond)
}
