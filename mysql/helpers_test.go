package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
	mysqldrv "github.com/go-sql-driver/mysql"
)

// quiet keeps the dialect's logs out of test output.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// serverDSN returns the test server's DSN in the driver's form, with no
// database selected.
func serverDSN(t testing.TB) *mysqldrv.Config {
	t.Helper()
	form, err := driverForm(dbtest.DSN(dialect.MySQL))
	if err != nil {
		t.Fatalf("DBQ_MYSQL_DSN: %v", err)
	}
	mc, err := mysqldrv.ParseDSN(form)
	if err != nil {
		t.Fatalf("DBQ_MYSQL_DSN: %v", err)
	}
	return mc
}

var (
	adminOnce sync.Once
	adminDB   *sql.DB
	adminErr  error
)

// admin returns a pool on the test server for setup and inspection, or
// ends the test as dbtest.Unreachable says when the server does not
// answer.
func admin(t testing.TB) *sql.DB {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a MySQL or MariaDB server; skipped in -short mode")
	}
	adminOnce.Do(func() {
		mc := serverDSN(t)
		mc.InterpolateParams = true
		c, err := mysqldrv.NewConnector(mc)
		if err != nil {
			adminErr = err
			return
		}
		db := sql.OpenDB(c)
		db.SetMaxIdleConns(16)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := db.PingContext(ctx); err != nil {
			db.Close()
			adminErr = err
			return
		}
		adminDB = db
	})
	if adminErr != nil {
		dbtest.Unreachable(t, dialect.MySQL, adminErr)
	}
	return adminDB
}

// newDatabase creates a database of the test's own, dropped at cleanup,
// and returns its name and the driver-form DSN that selects it.
func newDatabase(t testing.TB) (name, dsn string) {
	t.Helper()
	a := admin(t)
	name = dbtest.UniqueName("dbq_my")
	if _, err := a.Exec("CREATE DATABASE " + dialect.Quote(dialect.MySQL, name)); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		if _, err := a.Exec("DROP DATABASE IF EXISTS " + dialect.Quote(dialect.MySQL, name)); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	mc := serverDSN(t)
	mc.DBName = name
	return name, mc.FormatDSN()
}

// openQueue opens a migrated (or not) queue in a database of its own
// through Open, closed at cleanup.
func openQueue(t testing.TB, cfg Config, migrate bool) (*queue.Queue, *Driver) {
	t.Helper()
	_, dsn := newDatabase(t)
	return openQueueOn(t, dsn, cfg, migrate)
}

func openQueueOn(t testing.TB, dsn string, cfg Config, migrate bool) (*queue.Queue, *Driver) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	ctx := context.Background()
	q, err := Open(ctx, dsn, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { q.Close() })
	d := q.Driver().(*Driver)
	if migrate {
		if err := Migrate(ctx, d.DB(), cfg); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}
	return q, d
}

func newClaimer(t testing.TB, q *queue.Queue) *Claimer {
	t.Helper()
	c, err := q.NewClaimer(context.Background())
	if err != nil {
		t.Fatalf("NewClaimer: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c.(*Claimer)
}

// enqueueN enqueues n jobs on queue q with payloads "<prefix><i>".
func enqueueN(t testing.TB, q *queue.Queue, queueName string, n int, prefix string) []int64 {
	t.Helper()
	var ids []int64
	for start := 0; start < n; start += 1000 {
		var jobs []queue.NewJob
		for i := start; i < min(n, start+1000); i++ {
			jobs = append(jobs, queue.NewJob{Queue: queueName, Payload: fmt.Appendf(nil, "%s%d", prefix, i)})
		}
		got, err := q.Enqueue(context.Background(), jobs...)
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		ids = append(ids, got...)
	}
	return ids
}

// killConn kills a server session from another one, as a dying process
// or a cut network would end it.
func killConn(t testing.TB, id int64) {
	t.Helper()
	if id == 0 {
		return
	}
	if _, err := admin(t).Exec(fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
		t.Fatalf("KILL CONNECTION %d: %v", id, err)
	}
}

// InnoDB-only checks. Some tests read InnoDB's own transaction and lock
// lists — information_schema.INNODB_TRX, performance_schema.data_locks,
// SHOW ENGINE INNODB STATUS — which MySQL and MariaDB have and TiDB does
// not. They call innodbOnly (or ask hasInnoDBLocks for one check of
// theirs); on TiDB they skip, saying why. On MySQL and MariaDB they run.
// The InnoDB-only tests: TestClaimLocksOnlyWhatItReturns,
// TestClaimLocksExactly, TestCancelledClaimLeavesNothing,
// TestInterruptedClaimLeavesNothing, the conformance suite's
// CancelledClaimLeaksNothing (Leftovers, through openTrx), and the
// trx_rows_locked check of TestPauseInClaimSteps.

var (
	innodbOnce  sync.Once
	innodbLocks bool
	innodbErr   error
)

// hasInnoDBLocks reports whether the test server lists InnoDB's
// transactions and locks (it is not TiDB).
func hasInnoDBLocks(t testing.TB) bool {
	t.Helper()
	a := admin(t)
	innodbOnce.Do(func() {
		var v string
		innodbErr = a.QueryRow("SELECT VERSION()").Scan(&v)
		s, _ := parseVersion(v)
		innodbLocks = s.Flavor != TiDB
	})
	if innodbErr != nil {
		t.Fatalf("VERSION(): %v", innodbErr)
	}
	return innodbLocks
}

// innodbOnly skips a test that reads InnoDB's transaction or lock lists on
// a server without them.
func innodbOnly(t testing.TB) {
	t.Helper()
	if !hasInnoDBLocks(t) {
		t.Skip("InnoDB-only check: reads INNODB_TRX or the lock list, which TiDB does not have")
	}
}

// INNODB_TRX is a cache that InnoDB refills only when nobody has read it
// for 100 ms (every read restarts the clock), so readers that poll it
// faster than that read the same stale snapshot for ever. The tests read it
// one at a time, each at least 110 ms after the last.
var trxCache struct {
	sync.Mutex
	last time.Time
}

func readTrx(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	trxCache.Lock()
	defer trxCache.Unlock()
	if wait := time.Until(trxCache.last.Add(110 * time.Millisecond)); wait > 0 {
		time.Sleep(wait)
	}
	defer func() { trxCache.last = time.Now() }()
	return adminDB.QueryContext(ctx, query, args...)
}

// openTrx lists the InnoDB transactions open on session id.
func openTrx(t testing.TB, id int64) []string {
	t.Helper()
	innodbOnly(t)
	// A transaction seen COMMITTING is ending, not left open: a busy
	// server may still list one the caller's last statement committed.
	// Look again for a while; one still listed then is reported.
	var out []string
	for range 20 {
		var ending bool
		out, ending = openTrxOnce(t, id)
		if !ending {
			break
		}
	}
	return out
}

// openTrxOnce lists session id's transactions once, and reports whether
// all of them (at least one) are committing.
func openTrxOnce(t testing.TB, id int64) (out []string, ending bool) {
	t.Helper()
	admin(t)
	time.Sleep(110 * time.Millisecond) // a snapshot that postdates the caller's last statement
	rows, err := readTrx(context.Background(), `SELECT trx_id, trx_state, trx_rows_locked, trx_rows_modified
		FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ?`, id)
	if err != nil {
		t.Fatalf("INNODB_TRX: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var trx, state string
		var locked, modified int64
		if err := rows.Scan(&trx, &state, &locked, &modified); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("session %d: open transaction %s (%s), %d rows locked, %d modified",
			id, trx, state, locked, modified))
		if len(out) == 1 {
			ending = true
		}
		ending = ending && state == "COMMITTING"
	}
	return out, ending
}

// rowsLocked reads trx_rows_locked of session id's open transaction, from a
// snapshot taken after the transaction modified modified rows (the caller
// is paused inside it, so any such snapshot is current).
func rowsLocked(ctx context.Context, id int64, modified int) (int64, error) {
	for range 20 {
		rows, err := readTrx(ctx, `SELECT trx_rows_locked, trx_rows_modified FROM information_schema.INNODB_TRX
			WHERE trx_mysql_thread_id = ?`, id)
		if err != nil {
			return 0, err
		}
		var n, m int64
		found := rows.Next()
		if found {
			err = rows.Scan(&n, &m)
		}
		rows.Close()
		if err != nil {
			return 0, err
		}
		if found && m == int64(modified) {
			return n, nil
		}
	}
	return 0, fmt.Errorf("INNODB_TRX never showed session %d's transaction after its update", id)
}

// newPlainQueue makes a migrated queue through New on the user's own
// *sql.DB, opened from a DSN with none of Open's settings: no parseTime,
// no interpolateParams, the session's REPEATABLE READ.
func newPlainQueue(t testing.TB, cfg Config) *queue.Queue {
	t.Helper()
	db, _ := userPool(t, 0, cfg)
	return newOn(t, db, cfg)
}

// userPool opens a *sql.DB of the user's own on a migrated database of the
// test's own, from a DSN with none of Open's settings, with at most size
// connections (0: no limit) that all stay idle in the pool when returned.
func userPool(t testing.TB, size int, cfg Config) (*sql.DB, string) {
	t.Helper()
	_, dsn := newDatabase(t)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(size)
	db.SetMaxIdleConns(max(size, 8))
	if err := Migrate(context.Background(), db, cfg); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return db, dsn
}

// newOn returns a Queue through New on db, closed at cleanup.
func newOn(t testing.TB, db *sql.DB, cfg Config) *queue.Queue {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	q, err := New(db, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

func init() {
	// The driver logs a killed session's EOF; the tests kill on purpose.
	_ = mysqldrv.SetLogger(log.New(io.Discard, "", 0))
}

// heldRowLocks counts the record locks session id's transaction holds on
// the jobs table's primary key, where the server lists them: MySQL in
// performance_schema.data_locks; MariaDB in SHOW ENGINE INNODB STATUS, only
// when innodb_status_output_locks is ON. shown is false when it cannot tell.
func heldRowLocks(ctx context.Context, d *Driver, id int64) (n int64, shown bool, err error) {
	a := adminDB
	if d.Server().Flavor == MySQL {
		err = a.QueryRowContext(ctx, `SELECT COUNT(*) FROM performance_schema.data_locks l
			JOIN information_schema.INNODB_TRX x ON l.ENGINE_TRANSACTION_ID = x.trx_id
			WHERE x.trx_mysql_thread_id = ? AND l.LOCK_TYPE = 'RECORD' AND l.INDEX_NAME = 'PRIMARY'`, id).Scan(&n)
		return n, err == nil, err
	}
	var on int
	if err := a.QueryRowContext(ctx, "SELECT @@innodb_status_output_locks").Scan(&on); err != nil || on == 0 {
		return 0, false, err
	}
	var typ, name, status string
	if err := a.QueryRowContext(ctx, "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		return 0, false, err
	}
	i := strings.Index(status, fmt.Sprintf("thread id %d,", id))
	if i < 0 {
		return 0, false, nil // not listed (the output is truncated on a busy server)
	}
	section := status[i:]
	if end := strings.Index(section, "---TRANSACTION"); end >= 0 {
		section = section[:end]
	}
	if strings.Contains(section, "SUPPRESSING FURTHER PRINTS") {
		return 0, false, nil // InnoDB prints only the first 10 lock structs
	}
	for _, block := range strings.Split(section, "RECORD LOCKS ")[1:] {
		if strings.Contains(strings.SplitN(block, "\n", 2)[0], "index PRIMARY") {
			n += int64(strings.Count(block, "Record lock, heap no"))
		}
	}
	return n, true, nil
}

var leases = queue.Leases

// placeholders returns n "?" joined by ", ", for the tests' own statements.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
