package mssql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	mssqldb "github.com/microsoft/go-mssqldb"
)

// Claimer is the SQL Server queue.Claimer. Its claims are leases recorded
// in the jobs_inflight table, each under a token, so it holds no
// connection: calls share the driver's pool and may run concurrently.
type Claimer struct {
	d      *Driver
	closed atomic.Bool

	mu   sync.Mutex
	held map[int64]int64 // job id → token of the jobs this claimer holds, for Close
	// issued, when not nil (tests: Driver.trackTokens), records every
	// token this claimer's claims used, committed or not.
	issued map[int64]bool
}

var (
	_ queue.Claimer = (*Claimer)(nil)
)

// LeaseDuration returns how long a claim lasts without Extend.
func (c *Claimer) LeaseDuration() time.Duration { return c.d.cfg.Lease }

// Heartbeat is a third of the lease: how often a Worker extends the
// leases of the jobs it holds (queue.Claimer).
func (c *Claimer) Heartbeat() time.Duration { return c.LeaseDuration() / 3 }

// Claim takes up to n ready jobs of queue, at most MaxClaim, and returns
// them in claim order. See the package doc for the statement and its
// retries.
func (c *Claimer) Claim(ctx context.Context, queueName string, n int) ([]*queue.Job, error) {
	if c.isClosed() {
		return nil, queue.ErrClosed
	}
	if n <= 0 {
		return nil, queue.ErrInvalidLimit
	}
	if err := dialect.ValidateQueue(queueName); err != nil {
		return nil, err
	}
	n = min(n, MaxClaim)
	c.d.maybeRescue(ctx)
	jobs, _, err := retryConflicts(ctx, c.d.cfg.ClaimAttempts, c.d.pause, func(ctx context.Context) ([]*queue.Job, error) {
		return c.claimOnce(ctx, queueName, n)
	})
	if err != nil {
		return nil, classify("claim", c.d.dedupe, err)
	}
	slices.SortFunc(jobs, func(a, b *queue.Job) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.RunAt.Compare(b.RunAt), cmp.Compare(a.ID, b.ID))
	})
	c.mu.Lock()
	for _, j := range jobs {
		c.held[j.ID] = j.Token
	}
	c.mu.Unlock()
	return jobs, nil
}

// claimOnce runs the claim statement once under a new token. When the
// statement's outcome is unknown — the context ended or the connection
// broke while its rows were on the way — it moves whatever the token
// claimed back, so an interrupted claim leaves no claim behind.
func (c *Claimer) claimOnce(ctx context.Context, queueName string, n int) ([]*queue.Job, error) {
	token := newToken()
	if c.issued != nil {
		c.mu.Lock()
		c.issued[token] = true
		c.mu.Unlock()
	}
	leaseS, leaseMS := splitDuration(c.d.cfg.Lease)
	args := []any{
		sql.Named("n", int32(n)), sql.Named("queue", mssqldb.VarChar(queueName)), sql.Named("token", token),
		sql.Named("lease_s", leaseS), sql.Named("lease_ms", leaseMS)}
	name := sqlClaim
	if c.d.cfg.Strategy == UpdLock {
		name = sqlClaimUpdLock
	} else {
		args = append(args, sql.Named("window", int32(max(c.d.cfg.Window, n))))
	}
	stmt, err := c.d.variant(ctx, c.d.db, c.d.sql, name, name, 0)
	if err != nil {
		return nil, err
	}
	if c.d.server.Load() == serverBabelfish {
		return c.claimBabelfish(ctx, stmt, token, args)
	}
	jobs, err := c.scanClaim(ctx, stmt, token, args...)
	if err != nil {
		var server mssqldb.Error
		if !errors.As(err, &server) {
			// A server error fails and rolls back the autocommit statement;
			// anything else may have come after it committed.
			c.abandon(ctx, token)
		}
		return nil, err
	}
	return jobs, nil
}

// babelfishClaimTimeout bounds a claim on Babelfish, which runs to its end
// whatever the caller's context does.
const babelfishClaimTimeout = time.Minute

// claimBabelfish runs a Babelfish claim (sql/babelfish/claim.sql: a pick,
// the DELETE, a SELECT of what it moved) to its end, not cut off by ctx:
// a batch cancelled there could commit its DELETE after the clean-up had
// looked for its rows (CancelledClaimLeaksNothing lost jobs to their
// lease so). What it claimed after ctx ended, or under an error, goes
// back at once.
func (c *Claimer) claimBabelfish(ctx context.Context, stmt string, token int64, args []any) ([]*queue.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	run, cancel := context.WithTimeout(context.WithoutCancel(ctx), babelfishClaimTimeout)
	defer cancel()
	jobs, err := c.scanClaim(run, stmt, token, args...)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		c.abandon(ctx, token)
		return nil, err
	}
	return jobs, nil
}

// scanClaim runs the claim and reads every row. Rows are trusted only when
// rows.Err is nil: OUTPUT sends rows even for a statement that then fails
// with 1222 and is rolled back.
func (c *Claimer) scanClaim(ctx context.Context, stmt string, token int64, args ...any) ([]*queue.Job, error) {
	rows, err := c.d.db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var jobs []*queue.Job
	for rows.Next() {
		j := &queue.Job{State: queue.StateClaimed, Token: token}
		var lastErr, key sql.NullString
		if err := rows.Scan(&j.ID, &j.Queue, &j.Kind, &j.Payload, &j.Priority, &j.RunAt,
			&j.Attempt, &j.MaxAttempts, &lastErr, &key, &j.CreatedAt, &j.ClaimedUntil); err != nil {
			return nil, err
		}
		j.LastError, j.DedupeKey = lastErr.String, key.String
		j.RunAt, j.CreatedAt, j.ClaimedUntil = j.RunAt.UTC(), j.CreatedAt.UTC(), j.ClaimedUntil.UTC()
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return jobs, rows.Close()
}

// abandonTimeout bounds the clean-up after an interrupted claim.
const abandonTimeout = 10 * time.Second

// abandon moves back every job claimed under token. It runs even when ctx
// is cancelled, which is when it is needed.
func (c *Claimer) abandon(ctx context.Context, token int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	defer cancel()
	if _, err := c.d.db.ExecContext(ctx, c.d.sql.text(sqlAbandon), sql.Named("token", token)); err != nil &&
		!hasNumber(err, errInvalidObject) && !babelfishMissing(err) {
		c.d.cfg.Logger.Warn("dbq: could not return the jobs of an interrupted claim; they come back when their lease expires",
			"err", err, "lease", c.d.cfg.Lease)
	}
}

// newToken returns a random positive token. Tokens fence stale holders: a
// job re-claimed after its lease expired gets a new one.
func newToken() int64 {
	for {
		if t := rand.Int64(); t != 0 {
			return t
		}
	}
}

// leaseChunk is the most leases one statement carries: with leaseParams
// parameters per lease (Retry) it stays well under SQL Server's 2,100 per
// request.
const (
	leaseChunk  = 250
	leaseParams = 7
)

// Complete deletes the jobs and frees their dedupe keys.
func (c *Claimer) Complete(ctx context.Context, leases []queue.Lease) error {
	return c.end(ctx, leaseOp{op: "complete", stmt: sqlComplete, ends: true}, leases)
}

// Release puts the jobs back as they were, spending no attempt.
func (c *Claimer) Release(ctx context.Context, leases []queue.Lease) error {
	return c.end(ctx, leaseOp{op: "release", stmt: sqlRelease, ends: true}, leases)
}

// Extend renews the leases by the lease duration from now.
func (c *Claimer) Extend(ctx context.Context, leases []queue.Lease) error {
	leaseS, leaseMS := splitDuration(c.d.cfg.Lease)
	return c.end(ctx, leaseOp{op: "extend", stmt: sqlExtend,
		shared: []any{sql.Named("lease_s", leaseS), sql.Named("lease_ms", leaseMS)}}, leases)
}

// Retry records failures: see queue.Claimer. A retry with Snooze set
// only reschedules its job at now + Delay: attempt and last_error stay,
// Error and Dead are ignored. Like every retry it matches the lease's
// token, so a stale holder's snooze changes nothing.
func (c *Claimer) Retry(ctx context.Context, retries []queue.RetryParams) error {
	leases := make([]queue.Lease, len(retries))
	for i, r := range retries {
		if r.Delay < 0 {
			return fmt.Errorf("%w: retry %d: negative Delay %v", queue.ErrInvalidJob, i, r.Delay)
		}
		leases[i] = r.Lease
	}
	return c.end(ctx, leaseOp{op: "retry", stmt: sqlRetry, ends: true,
		row: func(k, i int) []any {
			r := retries[i]
			s, ms := splitDuration(r.Delay)
			dead, snooze, msg := bit(r.Dead), bit(r.Snooze), truncateUTF8(r.Error, queue.MaxErrorBytes)
			if r.Snooze {
				dead, msg = 0, ""
			}
			return []any{named("ds", k, s), named("dm", k, ms), named("dd", k, dead),
				named("sn", k, snooze), named("e", k, msg)}
		}}, leases)
}

// bit is b as the 0 or 1 a VALUES row compares with = 1.
func bit(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// leaseOp is a statement over a list of leases.
type leaseOp struct {
	op, stmt string
	// ends says the statement ends the claims it finds.
	ends bool
	// row returns the parameters of VALUES row k after id and token, from
	// lease i.
	row func(k, i int) []any
	// shared are the parameters of the whole statement.
	shared []any
}

func (c *Claimer) isClosed() bool { return c.closed.Load() || c.d.closed.Load() }

// end runs o over leases unless the claimer is closed.
func (c *Claimer) end(ctx context.Context, o leaseOp, leases []queue.Lease) error {
	if c.isClosed() {
		return queue.ErrClosed
	}
	return c.run(ctx, o, leases)
}

// run runs o over leases in chunks and reports the leases it found no row
// for — the token no longer matches — as lost.
func (c *Claimer) run(ctx context.Context, o leaseOp, leases []queue.Lease) error {
	if len(leases) == 0 {
		return nil
	}
	// The same lease twice would match its row twice.
	idx := make([]int, 0, len(leases))
	want := make([]queue.Lease, 0, len(leases))
	seen := make(map[queue.Lease]bool, len(leases))
	for i, l := range leases {
		if !seen[l] {
			seen[l] = true
			idx = append(idx, i)
			want = append(want, l)
		}
	}
	var done []int64
	for start := 0; start < len(idx); start += leaseChunk {
		chunk := idx[start:min(start+leaseChunk, len(idx))]
		args := append(make([]any, 0, leaseParams*len(chunk)+len(o.shared)), o.shared...)
		for k, i := range chunk {
			args = append(args, named("i", k, leases[i].ID), named("t", k, leases[i].Token))
			if o.row != nil {
				args = append(args, o.row(k, i)...)
			}
		}
		// A deadlock victim's statement was rolled back, and the tokens make
		// running it again safe.
		stmt, err := c.d.variant(ctx, c.d.db, c.d.sql, o.stmt, o.stmt, len(chunk))
		if err != nil {
			return err
		}
		ids, _, err := retryConflicts(ctx, c.d.cfg.ClaimAttempts, c.d.pause, func(ctx context.Context) ([]int64, error) {
			return dialect.QueryIDs(ctx, c.d.db, stmt, args...)
		})
		if err != nil {
			return classify(o.op, c.d.dedupe, err)
		}
		done = append(done, ids...)
	}
	c.forget(want, done, o.ends)
	return queue.LostLeases(want, done)
}

// forget drops from the held set the leases that are no longer this
// claimer's: all of them when the statement ended them, else the lost ones.
func (c *Claimer) forget(leases []queue.Lease, done []int64, ended bool) {
	ok := make(map[int64]bool, len(done))
	for _, id := range done {
		ok[id] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range leases {
		if c.held[l.ID] == l.Token && (ended || !ok[l.ID]) {
			delete(c.held, l.ID)
		}
	}
}

// Close gives back every job the claimer still holds. Further calls return
// queue.ErrClosed; closing again does nothing. After the Queue is closed
// there is no connection to give jobs back on: their leases expire.
func (c *Claimer) Close(ctx context.Context) error {
	if c.closed.Swap(true) || c.d.closed.Load() {
		return nil
	}
	c.mu.Lock()
	leases := make([]queue.Lease, 0, len(c.held))
	for id, token := range c.held {
		leases = append(leases, queue.Lease{ID: id, Token: token})
	}
	c.mu.Unlock()
	err := c.run(ctx, leaseOp{op: "close", stmt: sqlRelease, ends: true}, leases)
	if errors.Is(err, queue.ErrLeaseLost) {
		return nil // expired and taken by another claimer meanwhile
	}
	return err
}

// kill makes the claimer behave as if its process died: it forgets its
// jobs without ending their claims, which come back when their leases
// expire.
func (c *Claimer) kill() {
	c.mu.Lock()
	c.held = map[int64]int64{}
	c.mu.Unlock()
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
