package mysql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
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
	// of the seed, the only step that takes no lock). A lagging replica only
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
	// reads the same first n candidates, the seed taken literally, which
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

// readServer reads what the dialect needs to know about the server, and
// the session's default database ("" when none is selected).
func readServer(ctx context.Context, db *sql.DB, stmts *statements) (Server, string, error) {
	var (
		version  string
		database sql.NullString
		s        Server
	)
	err := db.QueryRowContext(ctx, stmts.get(sqlServer, 0)).Scan(&version, &s.AutoincLockMode,
		&s.AutoincIncrement, &s.MaxAllowedPacket, &database)
	if err != nil {
		return s, "", fmt.Errorf("dbq: mysql: reading the server version: %w", err)
	}
	v, err := parseVersion(version)
	if err != nil {
		return s, "", err
	}
	v.AutoincLockMode, v.AutoincIncrement, v.MaxAllowedPacket = s.AutoincLockMode, s.AutoincIncrement, s.MaxAllowedPacket
	if v.AutoincIncrement < 1 {
		v.AutoincIncrement = 1
	}
	if v.Galera, err = readWsrep(ctx, db, stmts); err != nil {
		return v, "", err
	}
	return v, database.String, v.check()
}

// readWsrep reports whether @@wsrep_on is ON (no row: no wsrep at all).
func readWsrep(ctx context.Context, db *sql.DB, stmts *statements) (bool, error) {
	rows, err := db.QueryContext(ctx, stmts.get(sqlServerWsrep, 0))
	if err != nil {
		return false, fmt.Errorf("dbq: mysql: reading wsrep_on: %w", err)
	}
	defer rows.Close()
	on := false
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return false, fmt.Errorf("dbq: mysql: reading wsrep_on: %w", err)
		}
		on = on || strings.EqualFold(value, "ON") || value == "1"
	}
	return on, rows.Err()
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
	mc, err := driverConfig(dsn)
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
		return nil, fmt.Errorf("%w (dsn %s)", err, dialect.Redact(dsn))
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
		return nil, fmt.Errorf("%w (dsn %s)", err, dialect.Redact(dsn))
	}
	q, err := queue.New(d, d.cfg.Config)
	if err != nil {
		db.Close()
		return nil, err
	}
	return q, nil
}

// driverConfig parses either DSN form and sets the dialect's options.
func driverConfig(dsn string) (*mysqldrv.Config, error) {
	form := dsn
	if strings.HasPrefix(strings.ToLower(dsn), "mysql://") {
		p, err := dialect.ParseDSN(dsn)
		if err != nil {
			return nil, err
		}
		form = p.Driver
	}
	mc, err := mysqldrv.ParseDSN(form)
	if err != nil {
		// The driver's message quotes no DSN, but be sure.
		return nil, fmt.Errorf("%w: mysql: bad DSN %s: %s", queue.ErrInvalidConfig, dialect.Redact(dsn), dialect.Redact(err.Error()))
	}
	mc.ParseTime = true
	mc.Loc = time.UTC
	mc.RejectReadOnly = true
	mc.InterpolateParams = true
	if mc.Params == nil {
		mc.Params = map[string]string{}
	}
	return mc, nil
}

// OpenDB returns a *sql.DB for dsn, in either form Open takes, with Open's
// session settings except the isolation level (which needs the server's
// flavour), for migrations and for callers that enqueue in their own
// database/sql transactions. It does not connect; errors never hold the
// password.
func OpenDB(dsn string) (*sql.DB, error) {
	mc, err := driverConfig(dsn)
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

// Enqueue inserts jobs, all or none, and returns their ids in order. tx is
// nil (a transaction of the driver's own; a single batch is one autocommit
// INSERT unless its ids are read back by marker) or the caller's *sql.Tx; anything else gives ErrUnsupportedTx.
// Each batch of up to 1000 jobs is one multi-row INSERT; its ids come from
// LAST_INSERT_ID() (the package documentation says how, and why that is
// exact in every innodb_autoinc_lock_mode).
func (d *Driver) Enqueue(ctx context.Context, tx any, jobs []queue.NewJob) ([]int64, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	for i, j := range jobs {
		if !j.RunAt.IsZero() {
			if y := j.RunAt.UTC().Year(); y < 1000 || y > 9999 {
				return nil, fmt.Errorf("job %d: %w: RunAt %v outside DATETIME's years 1000..9999", i, queue.ErrInvalidJob, j.RunAt)
			}
		}
	}
	batches := d.batches(jobs)
	switch t := tx.(type) {
	case nil:
		var ids []int64
		err := d.retry(ctx, func() error {
			var err error
			// By marker, the ids are read back after the INSERT: in the same
			// transaction, or a claim in between overwrites the marker.
			if len(batches) == 1 && !d.idsByMarker {
				ids, err = d.insert(ctx, d.db, batches[0], nil)
				return err
			}
			own, err := beginRC(ctx, d.db)
			if err != nil {
				return d.classify("enqueue", err)
			}
			ids = ids[:0]
			for _, b := range batches {
				if ids, err = d.insert(ctx, own, b, ids); err != nil {
					own.Rollback()
					return err
				}
			}
			return d.classify("enqueue commit", own.Commit())
		})
		return ids, err
	case *sql.Tx:
		if t == nil {
			return nil, fmt.Errorf("%w: nil *sql.Tx", queue.ErrUnsupportedTx)
		}
		var ids []int64
		for _, b := range batches {
			var err error
			if ids, err = d.insert(ctx, t, b, ids); err != nil {
				return nil, err
			}
		}
		return ids, nil
	default:
		return nil, fmt.Errorf("%w: %T (the mysql dialect takes a *sql.Tx)", queue.ErrUnsupportedTx, tx)
	}
}

// batches splits jobs into INSERTs of at most 1000 rows and about a
// quarter of max_allowed_packet (escaping can double a payload's bytes).
func (d *Driver) batches(jobs []queue.NewJob) [][]queue.NewJob {
	budget := int(d.server.MaxAllowedPacket / 4)
	if budget < 64<<10 {
		budget = 64 << 10
	}
	var out [][]queue.NewJob
	start, size := 0, 0
	for i, j := range jobs {
		sz := len(j.Payload) + len(j.DedupeKey) + 128
		if i > start && (i-start >= 1000 || size+sz > budget) {
			out = append(out, jobs[start:i])
			start, size = i, 0
		}
		size += sz
	}
	if start < len(jobs) {
		out = append(out, jobs[start:])
	}
	return out
}

type execQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (d *Driver) insert(ctx context.Context, ex execQuerier, jobs []queue.NewJob, ids []int64) ([]int64, error) {
	var marker any
	if d.idsByMarker {
		marker = newToken()
	}
	args := make([]any, 0, 8*len(jobs))
	for _, j := range jobs {
		var runAt any
		if !j.RunAt.IsZero() {
			runAt = formatTime(j.RunAt)
		}
		var dedupe any
		if j.DedupeKey != "" {
			dedupe = []byte(j.DedupeKey)
		}
		payload := j.Payload
		if payload == nil {
			payload = []byte{}
		}
		args = append(args, j.Queue, payload, j.Priority, runAt, micros(j.Delay), j.MaxAttempts, dedupe, marker)
	}
	res, err := ex.ExecContext(ctx, d.stmts.get(sqlEnqueue, len(jobs)), args...)
	if err != nil {
		if isDuplicate(err) {
			return nil, fmt.Errorf("%w: %v", queue.ErrDuplicate, err)
		}
		return nil, d.classify("enqueue", err)
	}
	first, err := res.LastInsertId()
	if err != nil {
		return nil, fmt.Errorf("dbq: mysql enqueue: %w", err)
	}
	if marker != nil {
		got, err := dialect.QueryIDs(ctx, ex, d.stmts.get(sqlEnqueueIDs, 0), first, marker, len(jobs))
		if err != nil {
			return nil, d.classify("enqueue ids", err)
		}
		if len(got) != len(jobs) {
			return nil, fmt.Errorf("dbq: mysql enqueue: found %d of the %d rows just inserted", len(got), len(jobs))
		}
		return append(ids, got...), nil
	}
	step := d.server.AutoincIncrement
	for i := range jobs {
		ids = append(ids, first+int64(i)*step)
	}
	return ids, nil
}

// Stats counts jobs per queue and says which of them are paused.
func (d *Driver) Stats(ctx context.Context) ([]queue.QueueStats, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	rows, err := d.db.QueryContext(ctx, d.stmts.get(sqlStats, 0))
	if err != nil {
		return nil, d.classify("stats", err)
	}
	defer rows.Close()
	var out []queue.QueueStats
	for rows.Next() {
		var s queue.QueueStats
		var ageMicros int64
		if err := rows.Scan(&s.Queue, &s.Ready, &s.Scheduled, &s.Held, &s.Dead, &ageMicros, &s.Paused); err != nil {
			return nil, d.classify("stats", err)
		}
		s.OldestReadyAge = float64(ageMicros) / 1e6
		out = append(out, s)
	}
	return out, d.classify("stats", rows.Err())
}

// ErrRescueBusy: a rescue was skipped because another session — most
// likely another process's — holds the table's rescue lock and is
// rescuing it now. Nothing was changed; the jobs whose leases expired are
// that session's to give back.
var ErrRescueBusy = errors.New("dbq: mysql: rescue skipped: another session is rescuing this table")

// Rescue gives back every job whose lease has expired — its holder died or
// stalled without Extend — in every queue, and returns how many. Each
// counts as a failed run: attempt+1, last_error says so, and a job out of
// attempts is dead. Claim runs one bounded pass over its own queue at most
// every Lease/4 by itself; call Rescue from a cron or the CLI to do it for
// all queues now. One session at a time rescues a table: while another
// holds its rescue lock, Rescue changes nothing and returns ErrRescueBusy.
func (d *Driver) Rescue(ctx context.Context) (int, error) {
	if d.closed.Load() {
		return 0, queue.ErrClosed
	}
	cn, err := d.db.Conn(ctx)
	if err != nil {
		return 0, d.classify("rescue", err)
	}
	defer cn.Close()
	total := 0
	err = d.withRescueLock(ctx, cn, func() error {
		queues, err := d.rescueQueues(ctx, cn)
		if err != nil {
			return err
		}
		for _, q := range queues {
			for {
				n, err := d.rescueOnce(ctx, cn, q)
				total += n
				if err != nil {
					return err
				}
				if n < d.cfg.RescueBatch {
					break
				}
			}
		}
		return nil
	})
	return total, err
}

// rescueQueues lists the queues that have jobs.
func (d *Driver) rescueQueues(ctx context.Context, cn *sql.Conn) ([]string, error) {
	rows, err := cn.QueryContext(ctx, d.stmts.get(sqlRescueQueues, 0))
	if err != nil {
		return nil, d.classify("rescue", err)
	}
	defer rows.Close()
	var queues []string
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			return nil, d.classify("rescue", err)
		}
		queues = append(queues, q)
	}
	return queues, d.classify("rescue", rows.Err())
}

// withRescueLock runs fn while session cn holds the table's rescue lock,
// a GET_LOCK whose name is the table's (rescueLockName): user locks are
// server-wide and die with their session, so a rescuer that dies frees
// the lock at once. GET_LOCK is asked with timeout 0: when another session
// holds the lock, fn does not run and the result is ErrRescueBusy. The
// lock is released on cn afterwards, even when ctx is done; if that fails,
// cn, which may still hold it, is closed rather than returned to the pool
// (the error then says so and matches driver.ErrBadConn). A server that
// refuses user locks altogether (Galera) gets fn run without one.
func (d *Driver) withRescueLock(ctx context.Context, cn *sql.Conn, fn func() error) error {
	var got sql.NullInt64
	if err := cn.QueryRowContext(ctx, d.stmts.get(sqlRescueGetLock, 0), d.rescueLock).Scan(&got); err != nil {
		var me *mysqldrv.MySQLError
		if errors.As(err, &me) && me.Number == erNotSupportedYet {
			// A Galera cluster refuses user locks. The rescue is safe
			// without one (it locks rows with SKIP LOCKED); concurrent
			// passes only repeat each other's candidate reads.
			d.noLockOnce.Do(func() {
				d.log.Warn("dbq: mysql: the server refuses GET_LOCK; rescues run without the rescue lock", "err", err)
			})
			return fn()
		}
		return d.classify("rescue lock", err)
	}
	switch {
	case !got.Valid:
		return fmt.Errorf("dbq: mysql rescue lock: GET_LOCK(%q) failed", d.rescueLock)
	case got.Int64 != 1:
		return ErrRescueBusy
	}
	if d.inRescue != nil {
		d.inRescue()
	}
	err := fn()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stepTimeout)
	defer cancel()
	var released sql.NullInt64
	if rerr := cn.QueryRowContext(rctx, d.stmts.get(sqlRescueReleaseLock, 0), d.rescueLock).Scan(&released); rerr != nil {
		discard(cn) // ends the session, and its lock
		return errors.Join(err, fmt.Errorf("dbq: mysql: releasing the rescue lock failed, session closed: %w",
			errors.Join(rerr, driver.ErrBadConn)))
	}
	return err
}

// rescueLockName returns the name of table's rescue lock in database:
// user lock names are server-wide, so it names both, and at most 64
// characters long (MySQL's limit), with a digest in place of longer names.
func rescueLockName(database, table string) string {
	const prefix = "dbq_rescue:"
	name := prefix + database + "." + table
	if len(name) <= 64 {
		return name
	}
	sum := sha256.Sum256([]byte(database + "." + table))
	return prefix + hex.EncodeToString(sum[:])[:64-len(prefix)]
}

// rescueOnce runs one bounded pass over queue q: candidate select through
// the claim index, then lock by primary key with SKIP LOCKED and update
// those still held and expired, in a READ COMMITTED transaction. It
// returns how many rows the update changed.
func (d *Driver) rescueOnce(ctx context.Context, c conn, q string) (int, error) {
	var n int
	err := d.retry(ctx, func() error {
		n = 0
		cand, err := dialect.QueryIDs(ctx, c, d.stmts.get(sqlRescueCandidates, 0), q, d.cfg.RescueBatch)
		if err != nil || len(cand) == 0 {
			return d.classify("rescue", err)
		}
		tx, err := beginRC(ctx, c)
		if err != nil {
			return d.classify("rescue", err)
		}
		defer tx.Rollback()
		locked, err := dialect.QueryIDs(ctx, tx, d.stmts.get(sqlRescueLock, len(cand)), anys(cand)...)
		if err != nil {
			return d.classify("rescue", err)
		}
		// The UPDATE decides: it changes only rows still held and expired,
		// and the pass counts what it changed.
		var changed int64
		if len(locked) > 0 {
			res, err := tx.ExecContext(ctx, d.stmts.get(sqlRescue, len(locked)), anys(locked)...)
			if err != nil {
				return d.classify("rescue", err)
			}
			if changed, err = res.RowsAffected(); err != nil {
				return d.classify("rescue", err)
			}
		}
		if err := tx.Commit(); err != nil {
			return d.classify("rescue", err)
		}
		n = int(changed)
		return nil
	})
	if n > 0 {
		d.log.Info("dbq: mysql: gave back jobs whose lease expired", "jobs", n, "queue", q, "table", d.stmts.jobsTable)
	}
	return n, err
}

// rescueDue reports whether a claim of queue q should run a rescue pass
// now, and if so books the pass so that concurrent claims skip it.
func (d *Driver) rescueDue(q string) bool {
	v, _ := d.lastRescue.LoadOrStore(q, new(atomic.Int64))
	last := v.(*atomic.Int64)
	prev := last.Load()
	now := int64(time.Since(d.epoch)) + 1 // never 0, which means "not yet"
	if prev != 0 && now-prev < int64(d.cfg.Lease/4) {
		return false
	}
	return last.CompareAndSwap(prev, now)
}

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
