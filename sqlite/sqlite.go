package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/queue"
	_ "modernc.org/sqlite" // registers driver "sqlite"
)

// DriverName is the database/sql driver name of modernc.org/sqlite.
const DriverName = "sqlite"

// BusyTimeout is how long a connection opened by [Open] (or with a [DSN])
// waits for another connection's write lock before SQLITE_BUSY.
const BusyTimeout = 10 * time.Second

// Config configures the SQLite dialect. The zero value means the defaults
// documented on queue.Config; Config.Schema is ignored (a SQLite file is
// its own schema).
type Config struct {
	queue.Config
}

// Driver is the SQLite [queue.Driver]. Get it from a Queue with
// q.Driver().(*sqlite.Driver), for example to reach [Driver.DB].
type Driver struct {
	db      *sql.DB
	ownDB   bool // opened by Open, closed by Close
	cfg     queue.Config
	names   dialect.Names
	stmts   *statements
	leaseUS int64
	log     *slog.Logger

	gate   chan struct{} // one in-process writer at a time; see write
	noGate bool          // tests only: compare with the bare busy handler

	start      time.Time
	nextRescue atomic.Int64 // nanoseconds since start
	closed     atomic.Bool
}

var (
	_ queue.Driver          = (*Driver)(nil)
	_ queue.Claimer         = (*Claimer)(nil)
	_ queue.CompleteClaimer = (*Claimer)(nil)
)

// Open opens (creating it if needed) the SQLite database that dsn names
// (any form [DSN] reads) with a *sql.DB of its own, configured as [DSN]
// describes, and returns a Queue over it. Queue.Close closes that *sql.DB.
// Open does not migrate: call [Migrate] (or `dbq migrate up`) once first.
func Open(ctx context.Context, dsn string, cfg Config) (*queue.Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	db, err := p.open()
	if err != nil {
		return nil, err
	}
	d, err := newDriver(db, true, cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	var mode string
	if err := db.QueryRowContext(ctx, d.stmts.journalMode).Scan(&mode); err != nil {
		db.Close()
		return nil, fmt.Errorf("dbq: sqlite: open %s: %w", p.file, err)
	}
	q, err := queue.New(d, d.cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	if !strings.EqualFold(mode, "wal") {
		q.Config().Logger.Warn("dbq: sqlite: database is not in WAL mode; readers will block the writer",
			"path", p.file, "journal_mode", mode)
	}
	return q, nil
}

// OpenDB opens (creating it if needed) the SQLite database that dsn names
// (any form [DSN] reads) as a *sql.DB configured as [DSN] describes, for
// [New], [Migrate] or goose. The caller closes it.
func OpenDB(dsn string) (*sql.DB, error) {
	p, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return p.open()
}

// New returns a Queue over db, a *sql.DB of the modernc.org/sqlite driver
// that the caller opened and closes. Open db with [DSN] so that every
// connection has WAL, a busy timeout and synchronous=NORMAL; without a busy
// timeout, writers of other processes meet SQLITE_BUSY, which dbq retries
// only a few times.
func New(db *sql.DB, cfg Config) (*queue.Queue, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sqlite: nil *sql.DB", queue.ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d, err := newDriver(db, false, cfg)
	if err != nil {
		return nil, err
	}
	return queue.New(d, d.cfg)
}

func newDriver(db *sql.DB, own bool, cfg Config) (*Driver, error) {
	qc := cfg.Config.WithDefaults()
	qc.Schema = "" // a SQLite file has no schemas
	names := qc.Names()
	stmts, err := loadStatements(names)
	if err != nil {
		return nil, err
	}
	d := &Driver{
		db:      db,
		ownDB:   own,
		cfg:     qc,
		names:   names,
		stmts:   stmts,
		leaseUS: qc.Lease.Microseconds(),
		log:     qc.Logger,
		gate:    make(chan struct{}, 1),
		start:   time.Now(),
	}
	return d, nil
}

// Migrate applies every pending migration of the job schema to db, for the
// table names of cfg.
func Migrate(ctx context.Context, db *sql.DB, cfg Config) error {
	if db == nil {
		return fmt.Errorf("%w: sqlite: nil *sql.DB", queue.ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	return migrations.Up(ctx, dialect.SQLite, db, sqliteNames(cfg.Config))
}

// sqliteNames drops the schema, which SQLite ignores.
func sqliteNames(c queue.Config) dialect.Names {
	n := c.Names()
	n.Schema = ""
	return n
}

// Dialect returns "sqlite".
func (d *Driver) Dialect() string { return string(dialect.SQLite) }

// DB returns the *sql.DB the driver uses, for a transaction to pass to
// Queue.EnqueueTx. Do not close it when the Queue came from [Open].
func (d *Driver) DB() *sql.DB { return d.db }

// Names returns the table names the driver uses.
func (d *Driver) Names() dialect.Names { return d.names }

// Close closes the *sql.DB if [Open] opened it; a *sql.DB given to [New]
// stays open.
func (d *Driver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.stmts.close()
	if !d.ownDB {
		return nil
	}
	if err := d.db.Close(); err != nil {
		return fmt.Errorf("dbq: sqlite: close: %w", err)
	}
	return nil
}

// NewClaimer returns a Claimer. SQLite claims are leases kept in the jobs
// table, so a Claimer holds no connection between calls; it takes one
// from the pool per call.
func (d *Driver) NewClaimer(ctx context.Context) (queue.Claimer, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &Claimer{d: d, held: map[int64]int64{}}, nil
}

// Stats counts jobs per queue, ordered by queue name. A claimed job whose
// lease has expired counts as ready, since the next claim takes it back.
func (d *Driver) Stats(ctx context.Context) ([]queue.QueueStats, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	return readAll(ctx, d, d.stmts.stats, scanQueueStats)
}

// scanQueueStats reads a row of stats.sql or count_queues.sql.
func scanQueueStats(rows *sql.Rows) (queue.QueueStats, error) {
	var s queue.QueueStats
	err := rows.Scan(&s.Queue, &s.Ready, &s.Scheduled, &s.Held, &s.Dead, &s.OldestReadyAge, &s.Paused)
	return s, err
}
