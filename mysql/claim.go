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

func (e *commitError) Error() string { return "dbq: mysql claim commit: " + e.err.Error() }
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

// adapt widens the spread when others took more than a quarter of what
// this claimer sampled, and narrows it slowly back towards exact order
// when it lost nothing.
func (c *Claimer) adapt(picked, locked int) {
	if picked == 0 {
		return
	}
	lost := picked - locked
	switch {
	case lost*4 > picked:
		c.spread = min(c.spread*2, float64(c.d.cfg.MaxSpread))
	case lost == 0:
		c.spread = max(1, c.spread*0.9)
	}
}

// sampleRuns is how many runs of consecutive candidates a claim takes.
const sampleRuns = 4

// sample returns k of ids (all of them when k covers them) as up to runs
// runs of consecutive ids, in run slots of the window picked at random.
// Consecutive candidates sit next to each other in the claim index and
// mostly on one primary-key page, so a claim of k rows touches about runs
// pages instead of k: claimers contend on fewer page latches and a claim
// takes fewer lock structs (measured: 18% less server CPU per job at 16
// claimers than a scattered sample). Runs short enough to make a collision
// cost only part of a batch keep empty locks rare (a single random block
// per claim emptied 10-15% of them at 16 claimers, 4 runs 2-3%).
func sample(ids []int64, k, runs int) []int64 {
	if k >= len(ids) {
		return ids
	}
	runLen := (k + runs - 1) / runs
	slots := (len(ids) + runLen - 1) / runLen
	out := make([]int64, 0, k)
	for _, sl := range rand.Perm(slots) {
		if len(out) == k {
			break
		}
		lo := sl * runLen
		out = append(out, ids[lo:min(lo+runLen, len(ids), lo+k-len(out))]...)
	}
	return out
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

// Complete deletes the jobs whose leases are still this holder's.
func (c *Claimer) Complete(ctx context.Context, leases []queue.Lease) error {
	return c.settle(ctx, "complete", leases, func(ls []queue.Lease) (string, []any) {
		return c.d.stmts.get(sqlComplete, len(ls)), leaseArgs(nil, ls)
	})
}

// CompleteClaim completes p.Complete and claims up to p.N jobs of p.Queue
// (queue.CompleteClaimer) with one transaction and one commit instead of
// two: the completions' DELETE (complete.sql) runs first in the claim's
// READ COMMITTED transaction on the claimer's session, before its locking
// select, so a Worker's batch costs one round trip more than a claim
// rather than Complete's four, and one commit fewer.
//
// Each part's outcome is what Complete and Claim report. The completion
// takes effect only with the claim's COMMIT, so whenever that attempt does
// not commit, CompleteClaim writes the completion alone, as Complete, before
// it claims on or returns: when the claim part fails (a deadlock, a lock
// wait timeout, a lost session, a cancelled ctx), finds no candidates, or
// is not even tried (a bad argument, a closed claimer), the completion
// still ends committed or reports Complete's error. So does a batch whose
// DELETE matched fewer rows than it has distinct leases — some lease is
// not this holder's: the transaction is rolled back and Complete tells the
// lost leases from the others (a *queue.LeaseLostError) before the claim
// is tried again at once. As with Complete, a COMMIT whose outcome is
// unknown (the session died during it) is followed by Complete alone,
// which reports the leases lost if the first had committed after all.
func (c *Claimer) CompleteClaim(ctx context.Context, p queue.CompleteClaimParams) queue.CompleteClaimResult {
	var res queue.CompleteClaimResult
	comp := &completion{leases: dedupeLeases(p.Complete)}
	if len(comp.leases) == 0 || len(comp.leases) > maxList {
		// Nothing to carry, or more than one statement's worth.
		res.CompleteErr = c.Complete(ctx, p.Complete)
		res.Jobs, res.ClaimErr = c.Claim(ctx, p.Queue, p.N)
		return res
	}
	res.Jobs, res.ClaimErr = c.claim(ctx, p.Queue, p.N, comp)
	if comp.pending() {
		comp.alone(ctx, c) // the claim returned before trying it
	}
	res.CompleteErr = comp.err
	return res
}

// completion is the batch of completions a CompleteClaim carries into
// its claim: written (settled) by the first claim transaction that
// commits, or else alone.
type completion struct {
	leases  []queue.Lease // distinct, at most maxList
	settled bool
	err     error // Complete's outcome, once settled
}

// pending reports whether comp is still to be written. A nil comp is not.
func (comp *completion) pending() bool { return comp != nil && !comp.settled }

// committed records that a claim transaction carrying comp committed: every
// lease was this holder's and its job is gone.
func (comp *completion) committed(c *Claimer) {
	comp.settled = true
	c.heldMu.Lock()
	for _, l := range comp.leases {
		if t, ok := c.held[l.ID]; ok && t == l.Token {
			delete(c.held, l.ID)
		}
	}
	c.heldMu.Unlock()
}

// alone writes comp with Complete.
func (comp *completion) alone(ctx context.Context, c *Claimer) {
	comp.settled = true
	comp.err = c.Complete(ctx, comp.leases)
}

// errCompletionShort rolls back a claim transaction whose completions'
// DELETE matched fewer rows than it had leases.
var errCompletionShort = errors.New("dbq: mysql: some completed lease was not this holder's")

// completeIn runs complete.sql for leases (distinct) in tx, and returns
// errCompletionShort unless it deleted one row per lease.
func (c *Claimer) completeIn(ctx context.Context, tx *sql.Tx, leases []queue.Lease) error {
	res, err := tx.ExecContext(ctx, c.d.stmts.get(sqlComplete, len(leases)), leaseArgs(nil, leases)...)
	if err != nil {
		return c.d.classify("complete", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return c.d.classify("complete", err)
	}
	if n != int64(len(leases)) {
		return errCompletionShort
	}
	return nil
}

// Release puts the jobs back, ready, spending no attempt.
func (c *Claimer) Release(ctx context.Context, leases []queue.Lease) error {
	return c.release(ctx, "release", leases)
}

func (c *Claimer) release(ctx context.Context, what string, leases []queue.Lease) error {
	return c.settle(ctx, what, leases, func(ls []queue.Lease) (string, []any) {
		return c.d.stmts.get(sqlRelease, len(ls)), leaseArgs(nil, ls)
	})
}

// Extend renews the leases: they now end Lease after the database's now.
func (c *Claimer) Extend(ctx context.Context, leases []queue.Lease) error {
	return c.settle(ctx, "extend", leases, func(ls []queue.Lease) (string, []any) {
		return c.d.stmts.get(sqlExtend, len(ls)), leaseArgs([]any{micros(c.d.cfg.Lease)}, ls)
	})
}

// Retry records failed runs: attempt+1, run_at = now + Delay, the error
// kept; a job out of attempts, or marked Dead, becomes dead. A Snooze
// makes the job ready again at now + Delay with its attempt and last_error
// as they were (Error and Dead are ignored). Either way the lease's token
// must still be the job's.
func (c *Claimer) Retry(ctx context.Context, retries []queue.RetryParams) error {
	byLease := make(map[queue.Lease]queue.RetryParams, len(retries))
	leases := make([]queue.Lease, len(retries))
	for i, r := range retries {
		if r.Delay < 0 {
			return fmt.Errorf("%w: negative retry Delay %v", queue.ErrInvalidJob, r.Delay)
		}
		leases[i] = r.Lease
		byLease[r.Lease] = r
	}
	return c.settle(ctx, "retry", leases, func(ls []queue.Lease) (string, []any) {
		args := make([]any, 0, 11*len(ls))
		for _, l := range ls {
			mode := "retry"
			switch r := byLease[l]; {
			case r.Snooze:
				mode = "snooze"
			case r.Dead:
				mode = "dead"
			}
			args = append(args, l.ID, mode)
		}
		for _, l := range ls {
			args = append(args, l.ID, micros(byLease[l].Delay))
		}
		for _, l := range ls {
			var msg any // NULL keeps last_error
			if r := byLease[l]; !r.Snooze {
				msg = truncateError(r.Error)
			}
			args = append(args, l.ID, msg)
		}
		for _, l := range ls {
			inc := 1
			if byLease[l].Snooze {
				inc = 0
			}
			args = append(args, l.ID, inc)
		}
		return c.d.stmts.get(sqlRetry, len(ls)), leaseArgs(args, ls)
	})
}

// leaseArgs appends the parameters every settling statement ends with: the
// ids for the IN list, then (id, token) pairs for the token match.
func leaseArgs(args []any, ls []queue.Lease) []any {
	for _, l := range ls {
		args = append(args, l.ID)
	}
	for _, l := range ls {
		args = append(args, l.ID, l.Token)
	}
	return args
}

// settle ends or renews leases with the statement build makes for a set of
// them. Per chunk, in a READ COMMITTED transaction on the pool, the fast
// path runs the statement alone: it matches rows by primary key, state
// and token, and when it changed one row per lease every lease was held
// and the transaction commits. Otherwise it is rolled back and the slow
// path tells held leases from lost ones: lock the rows by primary key,
// read their tokens, run the statement for the held ones, commit. Lost
// leases change nothing and are reported in a *queue.LeaseLostError.
func (c *Claimer) settle(ctx context.Context, what string, leases []queue.Lease,
	build func([]queue.Lease) (string, []any)) error {
	if (c.closed.Load() && what != "close") || c.d.closed.Load() {
		return queue.ErrClosed
	}
	want := dedupeLeases(leases)
	var done []int64
	for start := 0; start < len(want); start += maxList {
		chunk := want[start:min(start+maxList, len(want))]
		var ok []int64
		err := c.d.retry(ctx, func() error {
			var err error
			ok, err = c.settleChunk(ctx, what, chunk, build)
			return err
		})
		if err != nil {
			return err
		}
		done = append(done, ok...)
	}
	// Forget what ended and what was lost; an extended lease stays held.
	keep := map[int64]bool{}
	if what == "extend" {
		for _, id := range done {
			keep[id] = true
		}
	}
	c.heldMu.Lock()
	for _, l := range want {
		if t, ok := c.held[l.ID]; ok && t == l.Token && !keep[l.ID] {
			delete(c.held, l.ID)
		}
	}
	c.heldMu.Unlock()
	return queue.LostLeases(want, done)
}

func (c *Claimer) settleChunk(ctx context.Context, what string, chunk []queue.Lease,
	build func([]queue.Lease) (string, []any)) ([]int64, error) {
	d := c.d
	ids := make([]int64, len(chunk))
	for i, l := range chunk {
		ids[i] = l.ID
	}
	// Fast path.
	tx, err := beginRC(ctx, d.db)
	if err != nil {
		return nil, d.classify(what, err)
	}
	defer tx.Rollback()
	query, args := build(chunk)
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return nil, d.classify(what, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == int64(len(chunk)) {
		if err := tx.Commit(); err != nil {
			return nil, d.classify(what+" commit", err)
		}
		return ids, nil
	}
	if err := tx.Rollback(); err != nil {
		return nil, d.classify(what, err)
	}

	// Slow path: some lease is lost.
	tx, err = beginRC(ctx, d.db)
	if err != nil {
		return nil, d.classify(what, err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, d.stmts.get(sqlLeaseLock, len(ids)), anys(ids)...)
	if err != nil {
		return nil, d.classify(what, err)
	}
	tokens := make(map[int64]int64, len(chunk))
	for rows.Next() {
		var id int64
		var token sql.NullInt64
		if err := rows.Scan(&id, &token); err != nil {
			rows.Close()
			return nil, d.classify(what, err)
		}
		if token.Valid {
			tokens[id] = token.Int64
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, d.classify(what, err)
	}
	var held []queue.Lease
	for _, l := range chunk {
		if t, ok := tokens[l.ID]; ok && t == l.Token {
			held = append(held, l)
		}
	}
	if len(held) == 0 {
		return nil, nil // nothing to change; the rollback ends the tx
	}
	query, args = build(held)
	if _, err := tx.ExecContext(ctx, query, args...); err != nil {
		return nil, d.classify(what, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, d.classify(what+" commit", err)
	}
	out := make([]int64, len(held))
	for i, l := range held {
		out[i] = l.ID
	}
	return out, nil
}

// dedupeLeases drops repeated leases (same id and token), keeping order.
func dedupeLeases(ls []queue.Lease) []queue.Lease {
	seen := make(map[queue.Lease]struct{}, len(ls))
	out := ls[:0:0]
	for _, l := range ls {
		if _, dup := seen[l]; !dup {
			seen[l] = struct{}{}
			out = append(out, l)
		}
	}
	return out
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
