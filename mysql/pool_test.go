package mysql

import (
	"context"
	"database/sql"
	"errors"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

// poolSessions holds n connections of db at once — so that every idle one
// is among them — and reads on each the session settings dbq must leave as
// it found them and, when probe names a table, how many of its rows the
// session sees: a row another session has not committed counts only in a
// dirty read.
func poolSessions(t testing.TB, db *sql.DB, srv Server, n int, probe string) []map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	iso := srv.isolationVar()
	out := make([]map[string]string, n)
	for i := range n {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, n, err)
		}
		conns = append(conns, c)
		var isoV, innoWait, mdlWait, autocommit, sqlMode string
		if err := c.QueryRowContext(ctx, "SELECT @@SESSION."+iso+
			", @@SESSION.innodb_lock_wait_timeout, @@SESSION.lock_wait_timeout, @@SESSION.autocommit, @@SESSION.sql_mode").
			Scan(&isoV, &innoWait, &mdlWait, &autocommit, &sqlMode); err != nil {
			t.Fatalf("session settings: %v", err)
		}
		out[i] = map[string]string{iso: isoV, "innodb_lock_wait_timeout": innoWait,
			"lock_wait_timeout": mdlWait, "autocommit": autocommit, "sql_mode": sqlMode}
		if probe != "" {
			var seen string
			if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+probe).Scan(&seen); err != nil {
				t.Fatalf("dirty read probe: %v", err)
			}
			out[i]["uncommitted rows seen"] = seen
		}
	}
	return out
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// uncommittedRow creates a table holding one row that another session
// inserted and keeps uncommitted until the test ends, and returns the
// table's quoted name in database dbName.
func uncommittedRow(t *testing.T, dbName string) string {
	t.Helper()
	table := dialect.Quote(dialect.MySQL, dbName) + ".dirty_probe"
	a := admin(t)
	if _, err := a.Exec("CREATE TABLE " + table + " (id INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	tx, err := a.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() }) // before the database is dropped: cleanups run last first
	if _, err := tx.Exec("INSERT INTO " + table + " VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	return table
}

// TestUserPoolSessionsUnchanged: a Worker, Stats, Rescue and a cancelled
// claim on the user's own *sql.DB leave every connection of that pool
// with the isolation level and lock wait timeout it had: none of them
// reads another session's uncommitted rows afterwards (issue #14, 3).
func TestUserPoolSessionsUnchanged(t *testing.T) {
	t.Parallel()
	const size = 4
	db, dsn := userPool(t, size, Config{})
	probe := uncommittedRow(t, dsnDatabase(t, dsn))
	q := newOn(t, db, Config{LockWaitTimeout: 7 * time.Second})
	srv := q.Driver().(*Driver).Server()

	before := poolSessions(t, db, srv, size, probe)
	for i, m := range before {
		if !maps.Equal(m, before[0]) {
			t.Fatalf("the pool's connections differ before dbq ran: %v and %v", before[0], before[i])
		}
		if m["innodb_lock_wait_timeout"] == "7" || m[srv.isolationVar()] == "READ-UNCOMMITTED" || m["uncommitted rows seen"] != "0" {
			t.Fatalf("the server's defaults already look like dbq's settings (%v): the test would prove nothing", m)
		}
	}

	runWorkerOnce(t, q, 200)
	ctx := ctxTimeout(t, 30*time.Second)
	if _, err := q.Stats(ctx); err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if _, err := q.Driver().(*Driver).Rescue(ctx); err != nil {
		t.Fatalf("Rescue: %v", err)
	}
	c, err := q.NewClaimer(ctx)
	if err != nil {
		t.Fatalf("NewClaimer: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Claim(cancelled, "pool", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Claim: %v, want context.Canceled", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}

	for i, m := range poolSessions(t, db, srv, size, probe) {
		if !maps.Equal(m, before[0]) {
			t.Errorf("connection %d of the user's pool after dbq ran: %v; before: %v", i+1, m, before[0])
		}
	}
}

func dsnDatabase(t *testing.T, dsn string) string {
	t.Helper()
	i := strings.LastIndex(dsn, "/")
	name, _, _ := strings.Cut(dsn[i+1:], "?")
	if name == "" {
		t.Fatalf("no database in the test DSN")
	}
	return name
}

// runWorkerOnce enqueues n jobs on queue "pool", runs a Worker until it
// has completed them all, stops it and waits for Run to return.
func runWorkerOnce(t *testing.T, q *queue.Queue, n int) {
	t.Helper()
	enqueueN(t, q, "pool", n, "job")
	w, stop, ran := startWorker(t, q, nil, queue.WorkerConfig{Concurrency: 4})
	deadline := time.Now().Add(time.Minute)
	for w.Stats().Completed < int64(n) {
		select {
		case err := <-ran:
			t.Fatalf("Run returned early: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Worker completed %d of %d jobs in a minute", w.Stats().Completed, n)
		}
	}
	stop()
	if err := waitRun(t, w, ran, time.Minute); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// startWorker runs a Worker of queue "pool" with handler h (nil: one that
// succeeds) and cfg in the background; stop ends Run's ctx, and Run's
// result comes on ran.
func startWorker(t *testing.T, q *queue.Queue, h queue.Handler, cfg queue.WorkerConfig) (w *queue.Worker, stop func(), ran <-chan error) {
	t.Helper()
	if h == nil {
		h = func(context.Context, *queue.Job) error { return nil }
	}
	cfg.Queue, cfg.PollInterval = "pool", 10*time.Millisecond
	w, err := queue.NewWorker(q, h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	out := make(chan error, 1)
	go func() { out <- w.Run(ctx) }()
	return w, cancel, out
}

// waitRun returns what Run sent on ran, or fails the test when it has not
// returned within d.
func waitRun(t *testing.T, w *queue.Worker, ran <-chan error, d time.Duration) error {
	t.Helper()
	select {
	case err := <-ran:
		return err
	case <-time.After(d):
		t.Fatalf("Run has not returned %v after its ctx ended; stats %+v", d, w.Stats())
		return nil
	}
}

// TestClaimerNeedsTwoConnections: a pool too small for a Claimer's own
// connection plus one for Complete, Retry, Release and Extend is refused
// when the Claimer is made, with an error that names the setting, instead
// of hanging the first completion (issue #14, 4).
func TestClaimerNeedsTwoConnections(t *testing.T) {
	t.Parallel()
	db, _ := userPool(t, 1, Config{})
	q := newOn(t, db, Config{})
	ctx := ctxTimeout(t, 30*time.Second)
	c, err := q.NewClaimer(ctx)
	if err == nil {
		c.Close(ctx)
		t.Fatal("NewClaimer on a pool of one connection: no error")
	}
	if !errors.Is(err, ErrPoolTooSmall) || !errors.Is(err, queue.ErrInvalidConfig) || !strings.Contains(err.Error(), "SetMaxOpenConns") {
		t.Fatalf("NewClaimer on a pool of one connection: %v; want ErrPoolTooSmall, queue.ErrInvalidConfig, naming SetMaxOpenConns", err)
	}

	// Two connections: one claimer; a second would leave none.
	db.SetMaxOpenConns(2)
	c1, err := q.NewClaimer(ctx)
	if err != nil {
		t.Fatalf("NewClaimer on a pool of two: %v", err)
	}
	if c2, err := q.NewClaimer(ctx); !errors.Is(err, ErrPoolTooSmall) {
		if err == nil {
			c2.Close(ctx)
		}
		t.Fatalf("second NewClaimer on a pool of two: %v, want ErrPoolTooSmall", err)
	}
	jobs := enqueueN(t, q, "pool", 1, "job")
	got, err := c1.Claim(ctx, "pool", 1)
	if err != nil || len(got) != 1 || got[0].ID != jobs[0] {
		t.Fatalf("Claim: %v, %v", got, err)
	}
	if err := c1.Complete(ctx, leases(got)); err != nil {
		t.Fatalf("Complete on a pool of two: %v", err)
	}
	if err := c1.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// A closed claimer no longer counts.
	c3, err := q.NewClaimer(ctx)
	if err != nil {
		t.Fatalf("NewClaimer after the first closed: %v", err)
	}
	c3.Close(ctx)
}

// TestWorkerOnOneConnectionReturns: a Worker on a user pool of one
// connection either refuses to start or works; either way Run returns soon
// after its ctx ends (issue #14, 4: it used to claim jobs, wait for ever
// for a connection to complete them, and never return).
func TestWorkerOnOneConnectionReturns(t *testing.T) {
	t.Parallel()
	db, _ := userPool(t, 1, Config{})
	q := newOn(t, db, Config{})
	enqueueN(t, q, "pool", 5, "job")
	w, stop, ran := startWorker(t, q, nil, queue.WorkerConfig{ShutdownTimeout: time.Second})
	time.Sleep(500 * time.Millisecond)
	stop()
	if err := waitRun(t, w, ran, 10*time.Second); err != nil && !errors.Is(err, ErrPoolTooSmall) {
		t.Fatalf("Run: %v, want nil or ErrPoolTooSmall", err)
	}
}

// TestWorkerReturnsWhenPoolIsBusy: a Worker whose pool has a connection
// for its claimer and one more, which the application holds, cannot write
// its results; Run must still return within 20 s of its ctx ending
// (ShutdownTimeout is 1 s). The bound on each write, and on the Close that
// releases what is still held, is the Worker's (queue/worker.go): the
// dialect's Complete, Release and Close follow the ctx they are given
// (TestSettleFollowsCtxOnBusyPool).
func TestWorkerReturnsWhenPoolIsBusy(t *testing.T) {
	t.Parallel()
	db, _ := userPool(t, 2, Config{})
	q := newOn(t, db, Config{})
	enqueueN(t, q, "pool", 5, "job")
	// The application takes the pool's other connection once the
	// claimer has its own and the first job runs.
	started := make(chan struct{})
	var once atomic.Bool
	w, stop, ran := startWorker(t, q, func(context.Context, *queue.Job) error {
		if once.CompareAndSwap(false, true) {
			close(started)
		}
		return nil
	}, queue.WorkerConfig{Concurrency: 1, BatchSize: 1, ShutdownTimeout: time.Second})
	<-started
	app, err := db.Conn(ctxTimeout(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	time.Sleep(200 * time.Millisecond)
	stop()
	// Results that could not be written may make Run return an error;
	// what matters is that it returns.
	if err := waitRun(t, w, ran, 20*time.Second); err != nil {
		t.Logf("Run: %v", err)
	}
}

// TestBeginRCSetsIsolation: the dialect's transactions are READ COMMITTED
// whatever the session they run on was left at — here a session of Open's
// own pool set to READ UNCOMMITTED by someone else — so they never read
// another session's uncommitted rows.
func TestBeginRCSetsIsolation(t *testing.T) {
	t.Parallel()
	name, dsn := newDatabase(t)
	_, d := openQueueOn(t, dsn, Config{}, true)
	if d.Server().Flavor == TiDB {
		t.Skip("does not apply to TiDB: it has no READ UNCOMMITTED to leave a session at")
	}
	probe := uncommittedRow(t, name)
	ctx := ctxTimeout(t, 30*time.Second)
	d.db.SetMaxOpenConns(1) // the next transaction gets the session set here
	cn, err := d.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cn.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED"); err != nil {
		t.Fatal(err)
	}
	cn.Close()
	tx, err := beginRC(ctx, d.db)
	if err != nil {
		t.Fatalf("beginRC: %v", err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+probe).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("a transaction of beginRC read %d uncommitted rows of another session", n)
	}
}

// TestSettleFollowsCtxOnBusyPool: Complete, Retry, Release, Extend and
// Close wait for a pool connection only as long as their ctx lets them,
// and change nothing then; with a connection free again, the same leases
// settle.
func TestSettleFollowsCtxOnBusyPool(t *testing.T) {
	t.Parallel()
	db, _ := userPool(t, 2, Config{})
	q := newOn(t, db, Config{})
	ctx := ctxTimeout(t, 30*time.Second)
	enqueueN(t, q, "pool", 4, "job")
	c := newClaimer(t, q)
	jobs, err := c.Claim(ctx, "pool", 4)
	if err != nil || len(jobs) != 4 {
		t.Fatalf("Claim: %d jobs, %v", len(jobs), err)
	}
	app, err := db.Conn(ctx) // the pool's last connection
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close() // closed below; this is for a failure before that
	ops := map[string]func(context.Context) error{
		"Complete": func(ctx context.Context) error { return c.Complete(ctx, leases(jobs[:1])) },
		"Retry": func(ctx context.Context) error {
			return c.Retry(ctx, []queue.RetryParams{{Lease: jobs[1].Lease(), Error: "x", Delay: time.Hour}})
		},
		"Release": func(ctx context.Context) error { return c.Release(ctx, leases(jobs[2:3])) },
		"Extend":  func(ctx context.Context) error { return c.Extend(ctx, leases(jobs[3:])) },
	}
	for name, op := range ops {
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		start := time.Now()
		err := within(t, name+" on an exhausted pool", func() error { return op(short) })
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s on an exhausted pool: %v, want context.DeadlineExceeded", name, err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s on an exhausted pool returned after %v, its ctx ended after 200ms", name, took)
		}
	}
	app.Close()
	wantCountsOf(t, q, "pool", 0, 0, 4, 0)
	for name, op := range ops {
		if err := op(ctx); err != nil {
			t.Errorf("%s with a connection free: %v", name, err)
		}
	}
	wantCountsOf(t, q, "pool", 1, 1, 1, 0)

	// Close gives back what it holds through the pool: it too waits only
	// as long as its ctx lets it.
	if got, err := c.Claim(ctx, "pool", 1); err != nil || len(got) != 1 {
		t.Fatalf("Claim: %d jobs, %v", len(got), err)
	}
	if app, err = db.Conn(ctx); err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := within(t, "Close on an exhausted pool", func() error { return c.Close(short) }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close holding a job on an exhausted pool: %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close on an exhausted pool returned after %v, its ctx ended after 200ms", took)
	}
}

// within returns what fn returns, or ends the test when fn has not
// returned within 30s: a call that waits for a pool connection past its
// ctx would otherwise hang the test until go test's timeout. The pool's
// close at cleanup lets fn return then.
func within(t *testing.T, what string, fn func() error) error {
	t.Helper()
	out := make(chan error, 1)
	go func() { out <- fn() }()
	select {
	case err := <-out:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s has not returned 30s after its ctx ended", what)
		return nil
	}
}

func wantCountsOf(t *testing.T, q *queue.Queue, name string, ready, scheduled, held, dead int64) {
	t.Helper()
	st, err := q.Stats(ctxTimeout(t, 30*time.Second))
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	for _, s := range st {
		if s.Queue == name {
			if s.Ready != ready || s.Scheduled != scheduled || s.Held != held || s.Dead != dead {
				t.Fatalf("queue %s: %+v; want ready %d scheduled %d held %d dead %d", name, s, ready, scheduled, held, dead)
			}
			return
		}
	}
	t.Fatalf("queue %s not in Stats", name)
}
