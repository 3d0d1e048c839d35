package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

// Claimer is the MySQL [queue.Claimer]. It claims on a connection of its
// own — plain reads in READ UNCOMMITTED, transactions in READ COMMITTED,
// see doc.go — and ends or renews claims through the pool, so a Worker's
// many goroutines do not queue behind its claims. Safe for concurrent use;
// claims run one at a time.
type Claimer struct {
	d *Driver

	mu     sync.Mutex // serializes claims: they use conn
	conn   *sql.Conn  // nil until needed again after a broken connection
	connID int64      // CONNECTION_ID() of conn
	spread float64    // current spread, 1..MaxSpread; see Config.MaxSpread

	heldMu sync.Mutex
	held   map[int64]int64 // id -> token of the jobs this claimer holds

	emptyLocks atomic.Int64
	claims     atomic.Int64
	conflicts  atomic.Int64
	closed     atomic.Bool

	// inTx, when set (tests), runs inside each claim transaction after the
	// UPDATE and before COMMIT, with the candidates the claim sampled.
	inTx func(ctx context.Context, connID int64, sampled []int64, jobs []*queue.Job)
	// issued, when not nil (tests: Driver.trackTokens), records every
	// token this claimer's claims wrote, committed or not.
	issued map[int64]bool
}

var (
	_ queue.Claimer         = (*Claimer)(nil)
	_ queue.CompleteClaimer = (*Claimer)(nil)
)

// stepTimeout bounds each statement of a claim. A claim's statements run to
// the end even when the caller's context is cancelled — a cancel is checked
// between statements and rolls the claim back — so that a cancelled claim
// never leaves a half-dead session holding locks. None of them waits on a
// row lock but the DELETE of the completions a CompleteClaim carries (on
// rows its holder's own heartbeat may be extending), which the session's
// lock wait timeout bounds; so they are quick, and the bound is for a
// server that hangs.
const stepTimeout = 30 * time.Second

// NewClaimer returns a Claimer with a connection of its own. It fails
// with ErrPoolTooSmall when the pool's SetMaxOpenConns leaves no
// connection for Complete, Retry, Release and Extend besides those of this
// Driver's Claimers (see doc.go, Connections).
func (d *Driver) NewClaimer(ctx context.Context) (queue.Claimer, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	live := d.claimers.Add(1)
	if limit := d.db.Stats().MaxOpenConnections; limit > 0 && int64(limit) < live+1 {
		d.claimers.Add(-1)
		return nil, fmt.Errorf("%w: db.SetMaxOpenConns(%d) is too small for %d Claimer(s): each holds a connection of its own and Complete, Retry, Release and Extend need at least one more; raise it to at least %d",
			ErrPoolTooSmall, limit, live, live+1)
	}
	c := &Claimer{d: d, spread: 1, held: map[int64]int64{}}
	if d.trackTokens {
		c.issued = map[int64]bool{}
	}
	if err := c.connect(ctx); err != nil {
		d.claimers.Add(-1)
		return nil, err
	}
	return c, nil
}

// LeaseDuration returns how long a claim lasts without Extend.
func (c *Claimer) LeaseDuration() time.Duration { return c.d.cfg.Lease }

// Heartbeat is a third of the lease: how often a Worker extends the
// leases of the jobs it holds (queue.Claimer).
func (c *Claimer) Heartbeat() time.Duration { return c.LeaseDuration() / 3 }

// EmptyLocks counts this claimer's claim attempts that found candidates but
// locked none, and Claims its claim attempts that found candidates; see
// [Driver.EmptyLocks].
func (c *Claimer) EmptyLocks() (empty, claims int64) { return c.emptyLocks.Load(), c.claims.Load() }

// Conflicts counts this claimer's claim attempts that lost a Galera
// certification conflict and were retried at once; see [Driver.Conflicts].
func (c *Claimer) Conflicts() int64 { return c.conflicts.Load() }

// connect gets the claimer a fresh session. Called with mu held (or before
// the claimer is shared). The session's settings (sql/session.sql) are the
// claimer's alone: the connection never goes back to the pool (dropConn).
func (c *Claimer) connect(ctx context.Context) error {
	cn, err := c.d.db.Conn(ctx)
	if err != nil {
		return c.d.classify("claimer connection", err)
	}
	for _, s := range strings.Split(c.d.stmts.get(sqlSession, 0), ";\n") {
		if _, err := cn.ExecContext(ctx, s); err != nil {
			discard(cn)
			return c.d.classify("claimer session", err)
		}
	}
	var id int64
	if err := cn.QueryRowContext(ctx, c.d.stmts.get(sqlConnectionID, 0)).Scan(&id); err != nil {
		discard(cn)
		return c.d.classify("claimer session", err)
	}
	c.conn, c.connID = cn, id
	return nil
}

// dropConn closes the claimer's session, broken or not, rather than give
// it back to the pool with the claimer's settings.
func (c *Claimer) dropConn() {
	if c.conn == nil {
		return
	}
	discard(c.conn)
	c.conn, c.connID = nil, 0
}

// discard closes cn's session instead of returning it to the pool:
// database/sql closes a connection whose Raw callback returns
// driver.ErrBadConn.
func discard(cn *sql.Conn) {
	_ = cn.Raw(func(any) error { return driver.ErrBadConn })
	_ = cn.Close()
}

// Claim returns up to n ready jobs of queueName (at most 5000), held by
// this claimer; the package documentation describes the algorithm.
func (c *Claimer) Claim(ctx context.Context, queueName string, n int) ([]*queue.Job, error) {
	return c.claim(ctx, queueName, n, nil)
}

// claim is Claim, carrying comp (nil: none) into its first claim
// transaction; see CompleteClaim. Whenever an attempt that carried it
// does not commit, comp is written alone before the claim goes on.
func (c *Claimer) claim(ctx context.Context, queueName string, n int, comp *completion) ([]*queue.Job, error) {
	if c.closed.Load() || c.d.closed.Load() {
		return nil, queue.ErrClosed
	}
	if n <= 0 {
		return nil, fmt.Errorf("%w: %d", queue.ErrInvalidLimit, n)
	}
	if err := dialect.ValidateQueue(queueName); err != nil {
		return nil, err
	}
	if n > maxList {
		n = maxList
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, queue.ErrClosed
	}

	if c.d.rescueDue(queueName) {
		// One bounded pass, under the table's rescue lock: when another
		// session holds it, that session is rescuing and this claim skips.
		err := c.withConn(ctx, func(cn *sql.Conn) error {
			step, cancel := context.WithTimeout(context.WithoutCancel(ctx), stepTimeout)
			defer cancel()
			return c.d.withRescueLock(step, cn, func() error {
				_, err := c.d.rescueOnce(step, cn, queueName)
				return err
			})
		})
		switch {
		case errors.Is(err, ErrRescueBusy):
			c.d.log.Debug("dbq: mysql: rescue skipped, another session holds the rescue lock", "queue", queueName)
		case err != nil && !errors.Is(err, queue.ErrNotMigrated):
			c.d.log.Warn("dbq: mysql: rescue of expired leases failed", "err", err)
		}
	}

	var jobs []*queue.Job
	for attempt, empties, conflicts := 0, 0, 0; ; {
		var found bool
		carried := comp.pending()
		err := c.withConn(ctx, func(cn *sql.Conn) error {
			var err error
			jobs, found, err = c.claimOnce(ctx, cn, queueName, n, comp)
			return err
		})
		if carried && comp.pending() {
			// The completion did not commit with this attempt (it failed,
			// found no candidates, or some lease was not this holder's):
			// write it alone, as Complete would, before claiming on.
			comp.alone(ctx, c)
			if errors.Is(err, errCompletionShort) {
				continue
			}
		}
		switch {
		case err == nil && len(jobs) == 0 && found && empties < maxEmptyRetries:
			// Every sampled candidate was taken by others: look again at
			// once with the wider spread rather than report an empty queue.
			empties++
			continue
		case err == nil:
			return jobs, nil
		case conflicts < maxConflictRetries && isConflict(err, c.d.server.Galera):
			// A claim on another Galera node took these rows first: look
			// again at once, spread wider, after a jitter under a
			// millisecond so that the losers do not meet again.
			conflicts++
			c.conflicts.Add(1)
			c.d.conflicts.Add(1)
			c.spread = min(c.spread*2, float64(c.d.cfg.MaxSpread))
			c.d.log.Debug("dbq: mysql: certification conflict; claiming again", "err", err, "conflicts", conflicts)
			if werr := sleepFor(ctx, rand.N(time.Millisecond)); werr != nil {
				return nil, werr
			}
			continue
		case dialect.IsRetryable(err) && attempt < maxRetries:
			c.d.retried.Add(1)
			c.d.log.Debug("dbq: mysql: retrying claim", "err", err, "attempt", attempt+1)
			if werr := sleepJitter(ctx, attempt); werr != nil {
				return nil, werr
			}
			attempt++
			continue
		}
		return nil, err
	}
}

const maxEmptyRetries = 2

// maxConflictRetries bounds the immediate retries of one Claim after
// Galera certification conflicts; past it, a conflict is retried like any
// retryable error, with backoff.
const maxConflictRetries = 10

// withConn runs fn on the claimer's session, opening a new one if the last
// broke. A broken session is dropped, and the failure reported as
// retryable when it happened before anything could have been committed.
func (c *Claimer) withConn(ctx context.Context, fn func(*sql.Conn) error) error {
	if c.conn == nil {
		if err := c.connect(ctx); err != nil {
			return err
		}
	}
	err := fn(c.conn)
	if err != nil && isBadConn(err) {
		c.dropConn()
		var ce *commitError
		if !errors.As(err, &ce) {
			return &dialect.RetryableError{Err: err}
		}
	}
	return err
}

// commitError marks a failed COMMIT: whether the claim took effect is
// unknown, so it is not retried (its jobs, if any, come back when their
// lease expires).
type commitError struct{ err error }

func (e *commitError) Error() string { return e.err.Error() } // classify named the step
func (e *commitError) Unwrap() error { return e.err }

// claimOnce runs the three steps once, first deleting the completions of
// comp when it is pending (see CompleteClaim). found reports whether the
// candidate select found anything.
func (c *Claimer) claimOnce(ctx context.Context, cn *sql.Conn, q string, n int, comp *completion) (jobs []*queue.Job, found bool, err error) {
	d := c.d
	step, cancel := context.WithTimeout(context.WithoutCancel(ctx), stepTimeout)
	defer cancel()

	// Step 1: candidates, outside any transaction.
	window := int(math.Ceil(float64(n) * c.spread))
	window = min(window, maxList*4)
	var src dialect.Querier = cn
	if d.replica != nil {
		src = d.replica
	}
	cand, err := dialect.QueryIDs(step, src, d.stmts.get(sqlClaimCandidates, 0), q, q, window)
	if err != nil {
		return nil, false, d.classify("claim candidates", err)
	}
	if len(cand) == 0 {
		return nil, false, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, true, err
	}
	c.claims.Add(1)
	d.claims.Add(1)

	// A sample of k candidates: all of them at spread 1, a random share
	// of the window under contention. A small backlog is shared out too:
	// k = m/spread.
	k := min(n, int(math.Ceil(float64(len(cand))/c.spread)))
	pick := sample(cand, k, sampleRuns)

	// Steps 2 to 4, in one READ COMMITTED transaction, committed even
	// when it locked or changed nothing.
	tx, err := beginRC(step, cn)
	if err != nil {
		return nil, true, d.classify("claim begin", err)
	}
	done := false
	defer func() {
		if !done {
			_ = tx.Rollback()
		}
	}()
	carried := comp.pending()
	if carried {
		if err := c.completeIn(step, tx, comp.leases); err != nil {
			return nil, true, err
		}
	}
	locked, err := c.lock(step, tx, pick, q, micros(d.cfg.Lease))
	if err != nil {
		return nil, true, d.classify("claim lock", err)
	}
	if len(locked) > 0 {
		token := newToken()
		if c.issued != nil {
			c.heldMu.Lock()
			c.issued[token] = true
			c.heldMu.Unlock()
		}
		if jobs, err = c.take(step, tx, locked, token); err != nil {
			return nil, true, err
		}
	}
	c.adapt(len(pick), len(jobs))
	if len(jobs) > 0 {
		if c.inTx != nil {
			c.inTx(step, c.connID, pick, jobs)
		}
	} else {
		c.emptyLocks.Add(1)
		d.emptyLocks.Add(1)
	}
	if err := ctx.Err(); err != nil {
		return nil, true, err // the deferred rollback undoes the claim
	}
	done = true
	if err := tx.Commit(); err != nil {
		return nil, true, &commitError{d.classify("claim commit", err)}
	}
	if carried {
		comp.committed(c)
	}
	slices.SortFunc(jobs, func(a, b *queue.Job) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.RunAt.Compare(b.RunAt), cmp.Compare(a.ID, b.ID))
	})
	if len(jobs) > 0 {
		c.heldMu.Lock()
		for _, j := range jobs {
			c.held[j.ID] = j.Token
		}
		c.heldMu.Unlock()
	}
	return jobs, true, nil
}

// lock runs claim_lock.sql on ids and reads the rows it locked, each with
// the new lease's end as its ClaimedUntil (on a server whose SKIP LOCKED
// locks nothing, the rows it read: take decides).
func (c *Claimer) lock(ctx context.Context, tx *sql.Tx, ids []int64, q string, leaseUS int64) ([]*queue.Job, error) {
	args := make([]any, 0, len(ids)+3)
	args = append(args, leaseUS)
	for _, id := range ids {
		args = append(args, id)
	}
	args = append(args, q, q)
	rows, err := tx.QueryContext(ctx, c.d.stmts.get(sqlClaimLock, len(ids)), args...)
	if err != nil {
		return nil, err
	}
	return scanClaimed(rows)
}

// take makes the locked rows the claim's with token (claim_update.sql,
// which changes only rows still ready and due) and returns exactly the
// rows it changed. The claim trusts the UPDATE, not the lock: a row
// another claimer took between the lock and the UPDATE — the lock held
// nothing — is not changed, so not returned. When the UPDATE changed every
// locked row, those are the claim's rows, as lock read them; otherwise,
// and always where locks never hold (Driver.readBack: TiDB, where a row's
// columns may have changed since lock read them), the rows are read back
// by token (claim_read.sql).
func (c *Claimer) take(ctx context.Context, tx *sql.Tx, locked []*queue.Job, token int64) ([]*queue.Job, error) {
	d := c.d
	until := locked[0].ClaimedUntil
	args := make([]any, 0, 2+len(locked))
	args = append(args, token, formatTime(until))
	for _, j := range locked {
		args = append(args, j.ID)
	}
	res, err := tx.ExecContext(ctx, d.stmts.get(sqlClaimUpdate, len(locked)), args...)
	if err != nil {
		return nil, d.classify("claim update", err)
	}
	changed, err := res.RowsAffected()
	if err != nil {
		return nil, d.classify("claim update", err)
	}
	jobs := locked
	switch {
	case changed == 0:
		return nil, nil
	case changed < int64(len(locked)) || d.readBack:
		rows, err := tx.QueryContext(ctx, d.stmts.get(sqlClaimRead, len(locked)), append(args[2:], token)...)
		if err != nil {
			return nil, d.classify("claim read", err)
		}
		if jobs, err = scanClaimed(rows); err != nil {
			return nil, d.classify("claim read", err)
		}
		if int64(len(jobs)) != changed {
			return nil, fmt.Errorf("dbq: mysql claim: the UPDATE changed %d rows, %d read back by token", changed, len(jobs))
		}
	}
	for _, j := range jobs {
		j.Token, j.State = token, queue.StateClaimed
	}
	return jobs, nil
}

// scanClaimed reads the rows of claim_lock.sql or claim_read.sql (the job's
// columns, then the lease's end) and closes them.
func scanClaimed(rows *sql.Rows) ([]*queue.Job, error) {
	defer rows.Close()
	var jobs []*queue.Job
	for rows.Next() {
		var (
			j                       queue.Job
			runAt, createdAt, until utcTime
			lastErr                 sql.NullString
			kind, dedupe            []byte
		)
		if err := rows.Scan(&j.ID, &j.Queue, &kind, &j.Payload, &j.Priority, &runAt, &j.Attempt, &j.MaxAttempts,
			&lastErr, &dedupe, &createdAt, &until); err != nil {
			return nil, err
		}
		if j.Payload == nil {
			j.Payload = []byte{}
		}
		j.RunAt, j.CreatedAt, j.LastError, j.DedupeKey = runAt.T, createdAt.T, lastErr.String, string(dedupe)
		j.Kind = string(kind)
		j.ClaimedUntil = until.T
		jobs = append(jobs, &j)
	}
	return jobs, rows.Err()
}

// newToken returns a fresh random claim token: it only has to differ from
// the job's previous and next claims.
func newToken() int64 {
	for {
		if t := rand.Int64(); t != 0 {
			return t
		}
	}
}

// sleepJitter waits before retry attempt+1: 2^attempt ms, jittered ±50%,
// capped at 100 ms.
func sleepJitter(ctx context.Context, attempt int) error {
	base := min(time.Millisecond<<attempt, 100*time.Millisecond)
	return sleepFor(ctx, base/2+rand.N(base))
}

// sleepFor waits d or until ctx ends.
func sleepFor(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Close gives back every job the claimer still holds (Release) and closes
// its connection (never pooled again, see connect). A claim running
// meanwhile finishes first. Further calls return ErrClosed.
func (c *Claimer) Close(ctx context.Context) error {
	if c.closed.Swap(true) {
		return queue.ErrClosed
	}
	c.mu.Lock() // no claim in flight from here on
	defer c.mu.Unlock()
	c.heldMu.Lock()
	held := make([]queue.Lease, 0, len(c.held))
	for id, t := range c.held {
		held = append(held, queue.Lease{ID: id, Token: t})
	}
	c.heldMu.Unlock()
	var err error
	if len(held) > 0 && !c.d.closed.Load() {
		slices.SortFunc(held, func(a, b queue.Lease) int { return cmp.Compare(a.ID, b.ID) })
		if err = c.release(ctx, "close", held); errors.Is(err, queue.ErrLeaseLost) {
			err = nil // lost meanwhile: not ours to give back
		}
	}
	c.dropConn()
	c.d.claimers.Add(-1)
	return err
}
