package mssql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/queue"
	mssqldb "github.com/microsoft/go-mssqldb"
)

// Driver is the SQL Server queue.Driver. [New] and [Open] wrap one in a
// *queue.Queue; reach it with q.Driver().(*mssql.Driver) to call [Driver.Rescue].
type Driver struct {
	db     *sql.DB
	ownDB  bool
	cfg    Config
	sql    *statements // sql/*.sql
	move   *statements // sql/move/*.sql
	dedupe string      // the dedupe table's name, as it appears in error messages
	pause  pauseFunc
	// rescueLock names the application lock that lets one rescue pass at a
	// time run over this jobs_inflight table.
	rescueLock string

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
	d := &Driver{
		db: db, ownDB: own, cfg: cfg, sql: stmts, move: move,
		dedupe:     names.Prefix + "jobs_dedupe",
		pause:      jitterPause,
		rescueLock: lockResource("rescue", names.Qualified(dialect.MSSQL, names.Prefix+"jobs_inflight")),
	}
	return queue.New(d, cfg.Config)
}

// Open connects to the SQL Server a sqlserver:// DSN names and returns a
// Queue over the tables cfg names; closing the Queue closes the
// connections. Errors never hold the DSN's password.
func Open(ctx context.Context, dsn string, cfg Config) (*queue.Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	db, err := OpenDB(dsn)
	if err != nil {
		return nil, err
	}
	// Claimers share the pool; keep enough idle connections for them.
	db.SetMaxIdleConns(cfg.WithDefaults().Claimers + 2)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("dbq: connect to %s: %w", dialect.Redact(dsn), scrub(err, dsn))
	}
	q, err := newQueue(db, true, cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	return q, nil
}

// OpenDB returns a *sql.DB for a sqlserver:// DSN without connecting.
func OpenDB(dsn string) (*sql.DB, error) {
	d, err := dialect.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if d.Dialect != dialect.MSSQL {
		return nil, fmt.Errorf("%w: %s is not a sqlserver:// DSN", dialect.ErrUnknownScheme, d)
	}
	c, err := mssqldb.NewConnector(d.Driver)
	if err != nil {
		return nil, fmt.Errorf("dbq: bad sqlserver DSN %s: %w", dialect.Redact(dsn), scrub(err, dsn))
	}
	return sql.OpenDB(c), nil
}

var userinfoPassword = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://[^:@/]*:([^@]*)@`)

// scrub returns err, or when its text holds the DSN's password (a URL
// parse error quotes the whole DSN), an error with the password replaced.
func scrub(err error, dsn string) error {
	var pw string
	if u, perr := url.Parse(dsn); perr == nil && u.User != nil {
		pw, _ = u.User.Password()
	} else if m := userinfoPassword.FindStringSubmatch(dsn); m != nil {
		pw = m[1]
	}
	if pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), pw, "xxxxx"))
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
	return &Claimer{d: d, held: map[int64]int64{}}, nil
}

// enqueueChunk is the most jobs one INSERT carries: 8 parameters each, under
// SQL Server's 2,100 per request.
const enqueueChunk = 250

// Enqueue inserts jobs in one transaction — the caller's *sql.Tx, inside a
// savepoint so a failure leaves the caller's transaction usable, or its own
// — and returns their ids in order. A dedupe key that is not valid UTF-8
// gives queue.ErrInvalidJob before anything is sent (see checkKey).
func (d *Driver) Enqueue(ctx context.Context, tx any, jobs []queue.NewJob) ([]int64, error) {
	for i, j := range jobs {
		if err := checkKey(j.DedupeKey); err != nil {
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
	}
	switch tx := tx.(type) {
	case nil:
		own, err := d.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, classify("enqueue", d.dedupe, err)
		}
		ids, err := d.enqueue(ctx, own, jobs)
		if err != nil {
			_ = own.Rollback()
			return nil, err
		}
		if err := own.Commit(); err != nil {
			return nil, classify("enqueue", d.dedupe, err)
		}
		return ids, nil
	case *sql.Tx:
		if _, err := tx.ExecContext(ctx, d.sql.text(sqlSavepoint)); err != nil {
			return nil, classify("enqueue", d.dedupe, err)
		}
		ids, err := d.enqueue(ctx, tx, jobs)
		if err != nil {
			_, _ = tx.ExecContext(context.WithoutCancel(ctx), d.sql.text(sqlRollbackSavepoint))
			return nil, err
		}
		return ids, nil
	}
	return nil, fmt.Errorf("%w: %T (the mssql dialect takes a *sql.Tx)", queue.ErrUnsupportedTx, tx)
}

// checkKey refuses a dedupe key that is not valid UTF-8. The key column is
// NVARCHAR: the driver sends a Go string as UTF-16, replacing each invalid
// byte with U+FFFD, so such a key would be stored altered — and two keys
// that differ only in invalid bytes would collide. Queue names are already
// plain ASCII (dialect.ValidateQueue).
func checkKey(key string) error {
	if !utf8.ValidString(key) {
		return fmt.Errorf("%w: DedupeKey %q is not valid UTF-8, which SQL Server's NVARCHAR would store altered", queue.ErrInvalidJob, key)
	}
	return nil
}

func (d *Driver) enqueue(ctx context.Context, tx *sql.Tx, jobs []queue.NewJob) ([]int64, error) {
	ids := make([]int64, 0, len(jobs))
	for start := 0; start < len(jobs); start += enqueueChunk {
		chunk := jobs[start:min(start+enqueueChunk, len(jobs))]
		stmt, err := d.sql.rows(sqlEnqueue, len(chunk))
		if err != nil {
			return nil, err
		}
		args := make([]any, 0, 8*len(chunk))
		for i, j := range chunk {
			runAt := sql.NullTime{Time: j.RunAt.UTC(), Valid: !j.RunAt.IsZero()}
			s, ms := splitDuration(j.Delay)
			key := sql.NullString{String: j.DedupeKey, Valid: j.DedupeKey != ""}
			args = append(args,
				named("q", i, mssqldb.VarChar(j.Queue)), named("p", i, j.Payload), named("pr", i, j.Priority),
				named("ra", i, runAt), named("ds", i, s), named("dm", i, ms),
				named("ma", i, int32(j.MaxAttempts)), named("dk", i, key))
		}
		got, err := dialect.QueryIDs(ctx, tx, stmt, args...)
		if err != nil {
			return nil, classify("enqueue", d.dedupe, err)
		}
		if len(got) != len(chunk) {
			return nil, fmt.Errorf("dbq: enqueue: %d ids back for %d jobs", len(got), len(chunk))
		}
		ids = append(ids, got...) // ascending ids are input order
	}
	return ids, nil
}

// Stats counts the jobs of every queue, ordered by queue name, and says
// which are paused. Held jobs are those in jobs_inflight, where both
// strategies put the jobs they claim.
func (d *Driver) Stats(ctx context.Context) ([]queue.QueueStats, error) {
	rows, err := d.db.QueryContext(ctx, d.sql.text(sqlStats))
	if err != nil {
		return nil, classify("stats", d.dedupe, err)
	}
	defer rows.Close()
	var out []queue.QueueStats
	for rows.Next() {
		var s queue.QueueStats
		var ageMicros int64
		if err := rows.Scan(&s.Queue, &s.Ready, &s.Scheduled, &s.Held, &s.Dead, &ageMicros, &s.Paused); err != nil {
			return nil, classify("stats", d.dedupe, err)
		}
		s.OldestReadyAge = float64(ageMicros) / 1e6
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, classify("stats", d.dedupe, err)
	}
	return out, nil
}

// Rescue moves every job whose lease has expired back to its queue, in
// passes of at most RescueBatch jobs, and returns how many it moved. The
// run that lost its lease counts as a failed attempt; a job out of
// attempts becomes dead. One pass at a time runs over a table, across all
// processes: a pass that finds another one running (it holds the table's
// application lock) moves nothing, and Rescue returns, leaving the rest to
// the pass that runs. Claim runs one pass at most every quarter lease, so
// a deployment with claimers needs no other reaper; call Rescue to return
// expired leases on a queue no one is claiming from.
func (d *Driver) Rescue(ctx context.Context) (int, error) {
	if d.closed.Load() {
		return 0, queue.ErrClosed
	}
	total := 0
	for {
		n, ran, err := d.rescueOnce(ctx)
		total += n
		if err != nil || !ran || n < RescueBatch {
			return total, err
		}
	}
}

// rescueError is last_error for a job whose lease expired.
const rescueError = "dbq: lease expired before the job ended (claimer died, stalled or lost its connection)"

// rescueOnce runs one rescue pass: it reports how many jobs it moved and
// whether it ran at all, which it does not while another pass holds the
// table's application lock.
func (d *Driver) rescueOnce(ctx context.Context) (moved int, ran bool, err error) {
	var granted, n int32
	err = d.db.QueryRowContext(ctx, d.sql.text(sqlRescue), sql.Named("lock_resource", d.rescueLock),
		sql.Named("batch", int32(RescueBatch)), sql.Named("error", rescueError)).Scan(&granted, &n)
	if err != nil {
		return 0, false, classify("rescue", d.dedupe, err)
	}
	return int(n), granted >= 0, nil
}

// maxLockResource is the longest application lock name sp_getapplock
// takes: its @Resource is nvarchar(255), and a longer one is cut.
const maxLockResource = 255

// lockResource names an application lock of the dialect: "dbq." + what +
// ":" + the quoted, qualified table it guards, so that each table has its
// own. Application locks belong to the current database, so the database
// needs no place in the name. A name that would be cut — none that valid
// Names make — becomes a hash of itself instead, which stays distinct.
func lockResource(what, table string) string {
	r := "dbq." + what + ":" + table
	if utf8.RuneCountInString(r) <= maxLockResource {
		return r
	}
	sum := sha256.Sum256([]byte(r))
	return "dbq." + what + ":sha256:" + hex.EncodeToString(sum[:])
}

// maybeRescue runs one rescue pass when none has run for a quarter
// lease.
func (d *Driver) maybeRescue(ctx context.Context) {
	now := time.Now().UnixNano()
	last := d.lastRescue.Load()
	if now-last < int64(d.cfg.Lease/4) || !d.lastRescue.CompareAndSwap(last, now) {
		return
	}
	if n, _, err := d.rescueOnce(ctx); err != nil {
		if ctx.Err() == nil && !errors.Is(err, queue.ErrNotMigrated) {
			d.cfg.Logger.Warn("dbq: rescue of expired leases failed", "err", err)
		}
	} else if n > 0 {
		d.cfg.Logger.Info("dbq: rescued jobs whose lease expired", "jobs", n)
	}
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
