package sqlite

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dbqueue/dbq/dialect"
)

// stmt is one statement's text and, once first used, its *sql.Stmt on the
// driver's *sql.DB, which database/sql keeps prepared per connection:
// parsing a statement costs more than running it.
type stmt struct {
	text  string
	adhoc bool  // used once: run the text, keep nothing prepared
	err   error // why the text could not be rendered

	mu   sync.Mutex
	prep *sql.Stmt
}

// prepared returns the statement prepared on db. A failure (the table is
// not there yet) is not kept, so the next call tries again.
func (s *stmt) prepared(ctx context.Context, db *sql.DB) (*sql.Stmt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prep != nil {
		return s.prep, nil
	}
	p, err := db.PrepareContext(ctx, s.text)
	if err != nil {
		return nil, interpret(err)
	}
	s.prep = p
	return p, nil
}

func (s *stmt) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prep != nil {
		_ = s.prep.Close()
		s.prep = nil
	}
}

// runner runs statements: in the driver's own transaction (tx set, own
// true), in the caller's *sql.Tx (own false), or as autocommit statements
// on the pool (tx nil). The driver's statements go through their prepared
// form; the caller's transaction may belong to another *sql.DB, so it gets
// the text.
type runner struct {
	d   *Driver
	tx  *sql.Tx
	own bool
}

func (r runner) query(ctx context.Context, s *stmt, args ...any) (*sql.Rows, error) {
	var rows *sql.Rows
	var err error
	switch p, perr := r.stmt(ctx, s); {
	case perr != nil:
		return nil, perr
	case p != nil:
		rows, err = p.QueryContext(ctx, args...)
	case r.tx != nil:
		rows, err = r.tx.QueryContext(ctx, s.text, args...)
	default:
		rows, err = r.d.db.QueryContext(ctx, s.text, args...)
	}
	return rows, interpret(err)
}

func (r runner) exec(ctx context.Context, s *stmt, args ...any) (sql.Result, error) {
	var res sql.Result
	var err error
	switch p, perr := r.stmt(ctx, s); {
	case perr != nil:
		return nil, perr
	case p != nil:
		res, err = p.ExecContext(ctx, args...)
	case r.tx != nil:
		res, err = r.tx.ExecContext(ctx, s.text, args...)
	default:
		res, err = r.d.db.ExecContext(ctx, s.text, args...)
	}
	return res, interpret(err)
}

// stmt returns the prepared form of s to run, or nil to run its text.
func (r runner) stmt(ctx context.Context, s *stmt) (*sql.Stmt, error) {
	if s.err != nil {
		return nil, s.err
	}
	if s.adhoc || (r.tx != nil && !r.own) {
		return nil, nil
	}
	p, err := s.prepared(ctx, r.d.db)
	if err != nil {
		return nil, err
	}
	if r.tx != nil {
		p = r.tx.StmtContext(ctx, p)
	}
	return p, nil
}

// Busy retries: SQLITE_BUSY still surfaces when busy_timeout is unset (a
// *sql.DB the user opened) or runs out under heavy multi-process load. The
// operation is then retried with full jitter, at most busyRetries times.
const (
	busyRetries   = 8
	busyBackoff   = 5 * time.Millisecond
	busyBackoffMx = 250 * time.Millisecond
)

// retry runs op until it succeeds, fails with a non-retryable error, or has
// been retried busyRetries times.
func retry(ctx context.Context, op func() error) error {
	for attempt := 0; ; attempt++ {
		err := op()
		if err == nil || attempt >= busyRetries || !dialect.IsRetryable(err) {
			return err
		}
		ceil := min(busyBackoff<<attempt, busyBackoffMx)
		t := time.NewTimer(rand.N(ceil) + time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// write runs fn holding SQLite's write lock: in a transaction when tx is
// true, else as autocommit statements (fn runs one). Writers of one Driver
// take turns at a Go gate first, so within a process they queue in Go
// instead of polling the file lock in SQLite's busy handler, whose sleeps
// (up to 100 ms each) cost throughput and fairness; other processes still
// meet at the file lock, under busy_timeout. BUSY is retried (see retry).
//
// The transaction is BEGIN IMMEDIATE on a *sql.DB from Open (_txlock). On
// a caller's *sql.DB without _txlock it is a deferred BEGIN, which behaves
// the same here: the first statement of every dbq transaction writes, so
// it takes the write lock before reading anything and never has to upgrade
// a read snapshot (the case where SQLite returns BUSY without waiting).
func (d *Driver) write(ctx context.Context, tx bool, fn func(ctx context.Context, r runner) error) error {
	return retry(ctx, func() error { return d.writeOnce(ctx, tx, fn) })
}

func (d *Driver) writeOnce(ctx context.Context, tx bool, fn func(ctx context.Context, r runner) error) error {
	if !d.noGate {
		select {
		case d.gate <- struct{}{}:
			defer func() { <-d.gate }()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if !tx {
		return fn(ctx, runner{d: d})
	}
	t, err := d.begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(ctx, runner{d: d, tx: t, own: true}); err != nil {
		_ = t.Rollback()
		return err
	}
	if err := ctx.Err(); err != nil {
		_ = t.Rollback()
		return err
	}
	if err := t.Commit(); err != nil {
		return interpret(err)
	}
	return nil
}

// begin starts a transaction that ends only by Commit or Rollback from the
// calling goroutine. A transaction begun with ctx itself would be rolled
// back by database/sql in a goroutine of its own once ctx is done, so the
// write lock could still be held, for a moment, after a cancelled Claim
// returned. Here ctx can cut short the wait for the lock in BEGIN, and the
// statements inside run with ctx (a cancel interrupts them), but the
// rollback is always ours, done before write returns.
func (d *Driver) begin(ctx context.Context) (*sql.Tx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	txCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel) // only while BEGIN waits
	t, err := d.db.BeginTx(txCtx, nil)
	if !stop() {
		// ctx ended during BEGIN. If BEGIN still succeeded, database/sql
		// is rolling it back now; an empty transaction, gone in a moment.
		if err == nil {
			_ = t.Rollback()
		}
		return nil, ctx.Err()
	}
	if err != nil {
		cancel()
		return nil, interpret(err)
	}
	// txCtx is never cancelled now; database/sql releases it when t ends.
	return t, nil
}
