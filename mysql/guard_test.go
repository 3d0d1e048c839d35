package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
	mysqldrv "github.com/go-sql-driver/mysql"
)

// A server whose FOR UPDATE SKIP LOCKED is accepted but locks nothing
// (TiDB, issue #23) hands concurrent claimers the same rows. These tests
// build one on MariaDB with a database/sql driver wrapper that strips the
// locking clause from every statement, and hold the statements that
// change the rows (the claim UPDATE, the rescue UPDATE) until two sessions
// have read their rows: each then changes only what is still in the state
// it read, so every job goes to exactly one of them.

// noLockConnector wraps the go-sql-driver connector. Every statement
// loses "FOR UPDATE SKIP LOCKED"; statements containing hold wait at a
// barrier until parties of them have arrived (only the first parties do).
type noLockConnector struct {
	inner   driver.Connector
	hold    string
	parties int32

	arrived  atomic.Int32
	all      chan struct{} // closed when parties have arrived
	stripped atomic.Int32  // statements that lost their locking clause
}

func newNoLockDB(t testing.TB, dsn, hold string, parties int) (*sql.DB, *noLockConnector) {
	t.Helper()
	mc, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	mc.InterpolateParams = true
	inner, err := mysqldrv.NewConnector(mc)
	if err != nil {
		t.Fatal(err)
	}
	c := &noLockConnector{inner: inner, hold: hold, parties: int32(parties), all: make(chan struct{})}
	db := sql.OpenDB(c)
	t.Cleanup(func() { db.Close() })
	return db, c
}

func (c *noLockConnector) Connect(ctx context.Context) (driver.Conn, error) {
	cn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &noLockConn{Conn: cn, c: c}, nil
}

func (c *noLockConnector) Driver() driver.Driver { return c.inner.Driver() }

// rewrite strips the locking clause and, for a held statement, waits at
// the barrier (bounded: a test whose claimers never get there fails on
// what it counts, it does not hang).
func (c *noLockConnector) rewrite(ctx context.Context, q string) string {
	if strings.Contains(q, "FOR UPDATE SKIP LOCKED") {
		c.stripped.Add(1)
		q = strings.ReplaceAll(q, "FOR UPDATE SKIP LOCKED", "")
	}
	if c.hold != "" && strings.Contains(q, c.hold) {
		if n := c.arrived.Add(1); n == c.parties {
			close(c.all)
		} else if n < c.parties {
			select {
			case <-c.all:
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
			}
		}
	}
	return q
}

// met reports whether the barrier filled up.
func (c *noLockConnector) met() bool {
	select {
	case <-c.all:
		return true
	default:
		return false
	}
}

type noLockConn struct {
	driver.Conn
	c *noLockConnector
}

func (n *noLockConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return n.Conn.(driver.QueryerContext).QueryContext(ctx, n.c.rewrite(ctx, q), args)
}

func (n *noLockConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return n.Conn.(driver.ExecerContext).ExecContext(ctx, n.c.rewrite(ctx, q), args)
}

func (n *noLockConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return n.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, n.c.rewrite(ctx, q))
}

func (n *noLockConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return n.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (n *noLockConn) CheckNamedValue(nv *driver.NamedValue) error {
	return n.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

func (n *noLockConn) ResetSession(ctx context.Context) error {
	return n.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (n *noLockConn) IsValid() bool { return n.Conn.(driver.Validator).IsValid() }

func (n *noLockConn) Ping(ctx context.Context) error { return n.Conn.(driver.Pinger).Ping(ctx) }

// TestClaimTrustsItsUpdateNotItsLocks: two claimers are handed the same
// candidates and both "lock" all of them (the locking read locks
// nothing); both then run their claim UPDATE. Each job must come back from
// exactly one claimer, and with the token its row holds.
func TestClaimTrustsItsUpdateNotItsLocks(t *testing.T) {
	t.Parallel()
	const jobs = 40
	ctx, dsn, _, d0, ids := jobsDatabase(t, jobs)
	db, nl := newNoLockDB(t, dsn, "SET state = 'claimed'", 2)
	q := newOn(t, db, Config{MaxSpread: 1}) // both read the same first candidates
	a, b := newClaimer(t, q), newClaimer(t, q)

	got := make([][]*queue.Job, 2)
	both(t, func(i int) (err error) {
		got[i], err = []*Claimer{a, b}[i].Claim(ctx, "q", jobs)
		return err
	})
	if !nl.met() || nl.stripped.Load() < 2 {
		t.Fatalf("the claimers did not both reach their UPDATE with rows they read unlocked (stripped %d): the test proves nothing",
			nl.stripped.Load())
	}
	tokens := rowTokens(t, d0, ids)
	by := map[int64]int{}
	for i, js := range got {
		for _, j := range js {
			if prev, dup := by[j.ID]; dup {
				t.Errorf("job %d returned by claimer %d and claimer %d", j.ID, prev, i)
			}
			by[j.ID] = i
			if tokens[j.ID] != j.Token {
				t.Errorf("claimer %d returned job %d with token %d; the row holds %d", i, j.ID, j.Token, tokens[j.ID])
			}
		}
	}
	if len(by) != jobs {
		t.Errorf("%d distinct jobs claimed, want %d", len(by), jobs)
	}
	t.Logf("claimer a: %d jobs, claimer b: %d jobs", len(got[0]), len(got[1]))
}

// TestRescueTrustsItsUpdateNotItsLocks: two rescue passes are handed the
// same expired leases and neither locks them. Each job is given back once:
// its attempt goes up by one, and the passes count it once between them.
func TestRescueTrustsItsUpdateNotItsLocks(t *testing.T) {
	t.Parallel()
	const jobs = 30
	ctx, dsn, q0, d0, ids := jobsDatabase(t, jobs)
	holder := newClaimer(t, q0)
	if js, err := holder.Claim(ctx, "q", jobs); err != nil || len(js) != jobs {
		t.Fatalf("claim: %d jobs, %v", len(js), err)
	}
	// Every lease ends now.
	if _, err := d0.DB().ExecContext(ctx, "UPDATE "+d0.stmts.jobsTable+
		" SET claimed_until = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND"); err != nil {
		t.Fatal(err)
	}

	db, nl := newNoLockDB(t, dsn, "lease expired", 2)
	q := newOn(t, db, Config{})
	d := q.Driver().(*Driver)
	counts := make([]int, 2)
	both(t, func(i int) error {
		cn, err := d.DB().Conn(ctx)
		if err != nil {
			return err
		}
		defer cn.Close()
		counts[i], err = d.rescueOnce(ctx, cn, "q")
		return err
	})
	if !nl.met() {
		t.Fatal("the rescues did not both reach their UPDATE: the test proves nothing")
	}
	if counts[0]+counts[1] != jobs {
		t.Errorf("rescues counted %d + %d jobs, want %d in all", counts[0], counts[1], jobs)
	}
	attempts := rowInts(t, d0, "attempt", ids)
	for _, id := range ids {
		if attempts[id] != 1 {
			t.Errorf("job %d: attempt %d after one expiry, want 1", id, attempts[id])
		}
	}
}

// jobsDatabase makes a migrated database of the test's own with n ready
// jobs on queue "q", and returns a context bounding the test, its DSN, a
// queue on it and the jobs' ids.
func jobsDatabase(t testing.TB, n int) (context.Context, string, *queue.Queue, *Driver, []int64) {
	t.Helper()
	_, dsn := newDatabase(t)
	q, d := openQueueOn(t, dsn, Config{}, true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx, dsn, q, d, enqueueN(t, q, "q", n, "j")
}

// both runs fn(0) and fn(1) at once and fails the test on their errors.
func both(t testing.TB, fn func(i int) error) {
	t.Helper()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// rowTokens reads the claim_token of each of ids (0 for NULL).
func rowTokens(t testing.TB, d *Driver, ids []int64) map[int64]int64 {
	t.Helper()
	return rowInts(t, d, "COALESCE(claim_token, 0)", ids)
}

// rowInts reads an integer expression of each of ids' rows.
func rowInts(t testing.TB, d *Driver, expr string, ids []int64) map[int64]int64 {
	t.Helper()
	rows, err := d.DB().Query(fmt.Sprintf("SELECT id, %s FROM %s WHERE id IN (%s)",
		expr, d.stmts.jobsTable, placeholders(len(ids))), anys(ids)...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var id, v int64
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		out[id] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestExportTrustsItsDeleteNotItsLocks: an export batch whose locking read
// locked nothing sees a claimer take its jobs before it commits. Its
// DELETE must leave the claimed jobs to their holder, and its Commit must
// say the batch changed under it rather than report them moved.
func TestExportTrustsItsDeleteNotItsLocks(t *testing.T) {
	t.Parallel()
	const jobs = 10
	ctx, dsn, q0, _, ids := jobsDatabase(t, jobs)
	db, nl := newNoLockDB(t, dsn, "", 0)
	d := newOn(t, db, Config{}).Driver().(*Driver)
	batch, err := d.Export(ctx, queue.ExportFilter{Ready: true, Limit: jobs})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = batch.Rollback() }()
	if len(batch.Jobs()) != jobs || nl.stripped.Load() == 0 {
		t.Fatalf("export batch of %d jobs, locking clauses stripped %d", len(batch.Jobs()), nl.stripped.Load())
	}
	c := newClaimer(t, q0)
	held, err := c.Claim(ctx, "q", jobs)
	if err != nil || len(held) != jobs {
		t.Fatalf("a claim beside an export that locked nothing: %d jobs, %v (the test proves nothing)", len(held), err)
	}
	if err := batch.Commit(ctx, ids); err == nil {
		t.Error("Commit of a batch whose jobs were claimed meanwhile succeeded")
	}
	if err := c.Complete(ctx, leases(held)); err != nil {
		t.Errorf("the holder's Complete after the export: %v", err)
	}
}

// TestClaimReturnsOnlyWhatItChanged drives one claim's steps by hand on a
// session whose locking read locks nothing, while another session changes
// the rows between its lock and its UPDATE: the claim returns exactly the
// rows its UPDATE changed, as they stand, never what the lock step saw.
func TestClaimReturnsOnlyWhatItChanged(t *testing.T) {
	t.Parallel()
	const jobs = 10
	ctx, dsn, _, d0, ids := jobsDatabase(t, jobs)
	db, _ := newNoLockDB(t, dsn, "", 0)
	q := newOn(t, db, Config{})
	c := newClaimer(t, q)
	table := d0.stmts.jobsTable

	// steps runs the lock step, then meddle from another session, then the
	// UPDATE (and read-back), and commits.
	steps := func(meddle string, args ...any) []*queue.Job {
		t.Helper()
		tx, err := beginRC(ctx, c.conn)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		locked, err := c.lock(ctx, tx, ids, "q", micros(time.Minute))
		if err != nil || len(locked) != jobs {
			t.Fatalf("lock step: %d rows, %v", len(locked), err)
		}
		if _, err := d0.DB().ExecContext(ctx, meddle, args...); err != nil {
			t.Fatal(err)
		}
		got, err := c.take(ctx, tx, locked, 42)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		return got
	}

	// Another claimer takes half of the rows first: the claim changes and
	// returns the other half (fewer rows changed than locked: read back).
	half := anys(ids[:jobs/2])
	got := steps("UPDATE "+table+" SET state = 'claimed', claim_token = 7, claimed_until = UTC_TIMESTAMP(6) WHERE id IN ("+
		placeholders(len(half))+")", half...)
	if len(got) != jobs/2 || got[0].ID != ids[jobs/2] || got[0].Token != 42 || got[0].ClaimedUntil.IsZero() {
		t.Fatalf("claim beside a claimer that took ids[:%d] first returned %d jobs, first %+v; want ids[%d:] with token 42",
			jobs/2, len(got), got[0], jobs/2)
	}
	for id, tok := range rowTokens(t, d0, ids) {
		if want := map[bool]int64{true: 7, false: 42}[id < ids[jobs/2]]; tok != want {
			t.Errorf("job %d holds token %d, want %d", id, tok, want)
		}
	}

	// Where locks never hold (TiDB), a claim reads its rows back even when
	// it changed every one: a row may have changed since the lock step.
	if _, err := d0.DB().ExecContext(ctx, "UPDATE "+table+" SET state = 'ready', claim_token = NULL, claimed_until = NULL"); err != nil {
		t.Fatal(err)
	}
	c.d.readBack = true
	got = steps("UPDATE " + table + " SET attempt = 3, last_error = 'meanwhile'")
	if len(got) != jobs {
		t.Fatalf("claimed %d of %d", len(got), jobs)
	}
	for _, j := range got {
		if j.Attempt != 3 || j.LastError != "meanwhile" || j.Token != 42 {
			t.Errorf("job %d came back with attempt %d, last_error %q, token %d: what the lock step saw, not the row it claimed",
				j.ID, j.Attempt, j.LastError, j.Token)
		}
	}
}

// TestWorkersRunEachJobOnceWhereLocksDoNotHold: two Workers, each on a
// pool whose statements lose their locking clause (a server that accepts
// SKIP LOCKED and locks nothing), both reading the same first candidates,
// drain the queue through claim, complete and rescue: each job runs once.
func TestWorkersRunEachJobOnceWhereLocksDoNotHold(t *testing.T) {
	t.Parallel()
	const jobs = 400
	ctx, dsn, _, d0, _ := jobsDatabase(t, jobs)
	var (
		mu   sync.Mutex
		runs = map[int64]int{}
		ran  atomic.Int32
	)
	handler := func(_ context.Context, j *queue.Job) error {
		mu.Lock()
		runs[j.ID]++
		mu.Unlock()
		ran.Add(1)
		return nil
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ended := make(chan error, 2)
	var conns []*noLockConnector
	for range 2 {
		db, nl := newNoLockDB(t, dsn, "", 0)
		conns = append(conns, nl)
		w, err := queue.NewWorker(newOn(t, db, Config{MaxSpread: 1}), handler,
			queue.WorkerConfig{Queue: "q", Concurrency: 8, PollInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		go func() { ended <- w.Run(wctx) }()
	}
	for ran.Load() < jobs {
		select {
		case err := <-ended:
			t.Fatalf("a Worker stopped before the queue was drained: %v", err)
		case <-ctx.Done():
			t.Fatalf("%d of %d runs by the test's deadline", ran.Load(), jobs)
		case <-time.After(10 * time.Millisecond):
		}
	}
	stop()
	for range 2 {
		if err := <-ended; err != nil {
			t.Errorf("Worker.Run: %v", err)
		}
	}
	for i, nl := range conns {
		if nl.stripped.Load() == 0 {
			t.Errorf("Worker %d's statements lost no locking clause: the test proves nothing", i)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	twice := 0
	for _, n := range runs {
		if n > 1 {
			twice++
		}
	}
	var left int
	if err := d0.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM "+d0.stmts.jobsTable).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if len(runs) != jobs || twice != 0 || left != 0 {
		t.Errorf("%d distinct jobs ran in %d runs, %d of them more than once, %d rows left; want %d jobs, each once, none left",
			len(runs), ran.Load(), twice, left, jobs)
	}
}
