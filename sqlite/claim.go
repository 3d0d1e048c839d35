package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

// Claimer claims jobs with leases: a claim sets the job's state to claimed,
// a random token and claimed_until = now + lease, all on the database
// clock. Complete, Retry, Release and Extend match (id, token, claimed), so
// a holder whose lease expired and was taken back gets queue.ErrLeaseLost.
// A Claimer holds no connection between calls and is safe for concurrent
// use.
type Claimer struct {
	d         *Driver
	closed    atomic.Bool // set under mu, read without it by check
	abandoned atomic.Bool // see abandon

	mu   sync.Mutex
	held map[int64]int64 // id → token of the claims this claimer holds
}

// LeaseDuration returns how long a claim lasts without Extend.
func (c *Claimer) LeaseDuration() time.Duration { return c.d.cfg.Lease }

// Heartbeat is a third of the lease: how often a Worker extends the
// leases of the jobs it holds (queue.Claimer).
func (c *Claimer) Heartbeat() time.Duration { return c.LeaseDuration() / 3 }

func (c *Claimer) check() error {
	if c.closed.Load() || c.d.closed.Load() {
		return queue.ErrClosed
	}
	return nil
}

// Claim takes up to n ready jobs of queue in (priority, run_at, id) order.
//
// It runs in one BEGIN IMMEDIATE transaction: first, at most every quarter
// lease, a bounded rescue of expired leases; then the claim UPDATE; and when
// that came up short of n and no rescue ran yet, a rescue and a second claim
// for the rest, so expired jobs come back as soon as anyone asks for work.
//
// A claim that Close overtakes gives back the jobs it took and returns
// queue.ErrClosed: Close cannot see jobs before the claim returns them.
func (c *Claimer) Claim(ctx context.Context, q string, n int) ([]*queue.Job, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := dialect.ValidateQueue(q); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("%w: got %d", queue.ErrInvalidLimit, n)
	}
	token := newToken()
	var jobs []*queue.Job
	err := c.d.write(ctx, true, func(ctx context.Context, r runner) (err error) {
		jobs, err = c.d.claimIn(ctx, r, jobs[:0], q, n, token)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.claimed(ctx, jobs)
}

// claimIn is the body of a claim transaction: a rescue when one is due,
// the claim UPDATE, and when it came up short of n and no rescue ran yet,
// a rescue and a second claim for the rest. It appends to jobs.
func (d *Driver) claimIn(ctx context.Context, r runner, jobs []*queue.Job, q string, n int, token int64) ([]*queue.Job, error) {
	rescued := false
	if d.rescueDue() {
		if _, err := d.rescue(ctx, r); err != nil {
			return jobs, err
		}
		rescued = true
	}
	jobs, err := d.claim(ctx, r, jobs, q, n, token)
	if err != nil || len(jobs) >= n || rescued {
		return jobs, err
	}
	k, err := d.rescue(ctx, r)
	if err != nil || k == 0 {
		return jobs, err
	}
	return d.claim(ctx, r, jobs, q, n-len(jobs), token)
}

// claimed sorts the jobs a committed claim took and records them as held
// (keep).
func (c *Claimer) claimed(ctx context.Context, jobs []*queue.Job) ([]*queue.Job, error) {
	slices.SortFunc(jobs, func(a, b *queue.Job) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.RunAt.Compare(b.RunAt), cmp.Compare(a.ID, b.ID))
	})
	if err := c.keep(ctx, jobs); err != nil {
		return nil, err
	}
	return jobs, nil
}

// CompleteClaim completes p.Complete and claims up to p.N jobs of p.Queue
// in one write transaction (queue.CompleteClaimer): BEGIN IMMEDIATE, the
// DELETE of complete.sql, then what Claim runs, COMMIT. A Worker's batch
// so takes SQLite's write lock once instead of twice.
//
// The interface has the completion commit before the claim starts. Here
// both commit together, and the observable outcome is kept this way:
//   - When the transaction fails after the DELETE ran (the claim or the
//     COMMIT failed, a cancelled ctx interrupted the claim, SQLite rolled
//     the whole transaction back), the completion is redone alone, as
//     Complete, with ctx's values but not its cancellation, for at most
//     [BusyTimeout]; CompleteErr is that Complete's outcome and ClaimErr
//     the claim's error.
//   - When the DELETE itself fails, nothing was written: CompleteErr is
//     its error, and the claim runs alone, as Claim.
//   - An invalid queue or n fails the claim only; the completion runs
//     alone.
//
// CompleteErr reports leases that were not this holder's in a
// *queue.LeaseLostError, as Complete does.
func (c *Claimer) CompleteClaim(ctx context.Context, p queue.CompleteClaimParams) queue.CompleteClaimResult {
	var res queue.CompleteClaimResult
	if err := c.check(); err != nil {
		res.CompleteErr, res.ClaimErr = err, err
		return res
	}
	if len(p.Complete) == 0 {
		res.Jobs, res.ClaimErr = c.Claim(ctx, p.Queue, p.N)
		return res
	}
	if err := dialect.ValidateQueue(p.Queue); err != nil {
		res.CompleteErr, res.ClaimErr = c.Complete(ctx, p.Complete), err
		return res
	}
	if p.N <= 0 {
		res.CompleteErr, res.ClaimErr = c.Complete(ctx, p.Complete), fmt.Errorf("%w: got %d", queue.ErrInvalidLimit, p.N)
		return res
	}
	d := c.d
	token := newToken()
	arg := leasesJSON(p.Complete)
	var (
		done    []int64
		jobs    []*queue.Job
		deleted bool // the DELETE ran in the transaction that failed
	)
	err := d.write(ctx, true, func(ctx context.Context, r runner) (err error) {
		deleted = false
		if done, err = d.ended(ctx, r, done[:0], d.stmts.complete, arg); err != nil {
			return err
		}
		deleted = true
		jobs, err = d.claimIn(ctx, r, jobs[:0], p.Queue, p.N, token)
		return err
	})
	switch {
	case err == nil:
		res.CompleteErr = c.forget(p.Complete, done)
		res.Jobs, res.ClaimErr = c.claimed(ctx, jobs)
	case deleted:
		// Not c.Complete: a Close since the start must not stop the redo.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), BusyTimeout)
		done, cerr := d.batch(rctx, d.stmts.complete, arg)
		cancel()
		if res.CompleteErr = cerr; cerr == nil {
			res.CompleteErr = c.forget(p.Complete, done)
		}
		res.ClaimErr = err
	default:
		res.CompleteErr = err
		res.Jobs, res.ClaimErr = c.Claim(ctx, p.Queue, p.N)
	}
	return res
}

// keep records the jobs a claim took as held, so that Close gives them
// back. When Close has run meanwhile — it sets closed under c.mu, so it
// either saw these jobs or they see closed here — keep gives them back
// itself and returns queue.ErrClosed.
func (c *Claimer) keep(ctx context.Context, jobs []*queue.Job) error {
	abandoned := c.abandoned.Load()
	c.mu.Lock()
	closed := c.closed.Load()
	if !closed && !abandoned {
		for _, j := range jobs {
			c.held[j.ID] = j.Token
		}
	}
	c.mu.Unlock()
	if !closed {
		return nil
	}
	if abandoned || len(jobs) == 0 || c.d.closed.Load() {
		return queue.ErrClosed
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), BusyTimeout)
	defer cancel()
	if _, err := c.d.batch(rctx, c.d.stmts.release, leasesJSON(queue.Leases(jobs))); err != nil {
		return fmt.Errorf("%w; giving back the jobs its last claim took: %w", queue.ErrClosed, err)
	}
	return queue.ErrClosed
}

// newToken returns a random nonzero claim token.
func newToken() int64 {
	for {
		if t := rand.Int64(); t != 0 {
			return t
		}
	}
}

func (d *Driver) claim(ctx context.Context, r runner, jobs []*queue.Job, q string, n int, token int64) ([]*queue.Job, error) {
	rows, err := r.query(ctx, d.stmts.claim, token, d.leaseUS, q, n)
	if err != nil {
		return jobs, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			j                               queue.Job
			priority, runAt, until, created int64
			attempt, maxAttempts            int64
			lastErr, dedupe                 sql.NullString
		)
		if err := rows.Scan(&j.ID, &j.Kind, &j.Payload, &priority, &runAt, &attempt, &maxAttempts,
			&until, &lastErr, &dedupe, &created); err != nil {
			return jobs, interpret(err)
		}
		j.Queue, j.Token = q, token
		if j.Payload == nil {
			j.Payload = []byte{}
		}
		j.Priority = int16(priority)
		j.RunAt = fromMicros(runAt)
		j.Attempt = int(attempt)
		j.MaxAttempts = int(maxAttempts)
		j.State = queue.StateClaimed
		j.ClaimedUntil = fromMicros(until)
		j.LastError = lastErr.String
		j.DedupeKey = dedupe.String
		j.CreatedAt = fromMicros(created)
		jobs = append(jobs, &j)
	}
	return jobs, interpret(rows.Err())
}

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// Complete deletes the held jobs named by leases.
func (c *Claimer) Complete(ctx context.Context, leases []queue.Lease) error {
	return c.end(ctx, leases, c.d.stmts.complete, leasesJSON(leases))
}

// Release puts held jobs back as they were, spending no attempt.
func (c *Claimer) Release(ctx context.Context, leases []queue.Lease) error {
	return c.end(ctx, leases, c.d.stmts.release, leasesJSON(leases))
}

// Extend renews the leases to now + the lease duration. The jobs stay held.
func (c *Claimer) Extend(ctx context.Context, leases []queue.Lease) error {
	if err := c.check(); err != nil {
		return err
	}
	if len(leases) == 0 {
		return nil
	}
	done, err := c.d.batch(ctx, c.d.stmts.extend, leasesJSON(leases), c.d.leaseUS)
	if err != nil {
		return err
	}
	lost := queue.LostLeases(leases, done)
	c.forgetLost(lost)
	return lost
}

// Retry ends held jobs with a failure: attempt+1, run_at = now + Delay,
// last_error = Error cut to queue.MaxErrorBytes; a job whose attempts are
// spent, or with Dead set, becomes dead.
func (c *Claimer) Retry(ctx context.Context, retries []queue.RetryParams) error {
	if err := c.check(); err != nil {
		return err
	}
	leases := make([]queue.Lease, len(retries))
	for i, r := range retries {
		if r.Delay < 0 {
			return fmt.Errorf("%w: retry %d: negative Delay %v", queue.ErrInvalidJob, i, r.Delay)
		}
		leases[i] = r.Lease
	}
	return c.end(ctx, leases, c.d.stmts.retry, retriesJSON(retries))
}

// end runs a statement that ends claims and drops them from c.held.
func (c *Claimer) end(ctx context.Context, leases []queue.Lease, st *stmt, arg string) error {
	if err := c.check(); err != nil {
		return err
	}
	if len(leases) == 0 {
		return nil
	}
	done, err := c.d.batch(ctx, st, arg)
	if err != nil {
		return err
	}
	return c.forget(leases, done)
}

// forget drops ended claims from c.held and reports the leases missing
// from done, the ids a statement ended, as lost.
func (c *Claimer) forget(leases []queue.Lease, done []int64) error {
	c.mu.Lock()
	for _, l := range leases {
		if tok, ok := c.held[l.ID]; ok && tok == l.Token {
			delete(c.held, l.ID)
		}
	}
	c.mu.Unlock()
	return queue.LostLeases(leases, done)
}

// forgetLost drops lost leases from c.held: they are someone else's now.
func (c *Claimer) forgetLost(err error) {
	var lost *queue.LeaseLostError
	if !errors.As(err, &lost) {
		return
	}
	c.mu.Lock()
	for _, id := range lost.IDs {
		delete(c.held, id)
	}
	c.mu.Unlock()
}

// batch runs one autocommit statement over a whole batch and returns the
// ids it changed.
func (d *Driver) batch(ctx context.Context, st *stmt, args ...any) ([]int64, error) {
	var done []int64
	err := d.write(ctx, false, func(ctx context.Context, r runner) (err error) {
		done, err = d.ended(ctx, r, done[:0], st, args...)
		return err
	})
	return done, err
}

// ended runs a statement that returns the ids it changed and appends them
// to done.
func (d *Driver) ended(ctx context.Context, r runner, done []int64, st *stmt, args ...any) ([]int64, error) {
	rows, err := r.query(ctx, st, args...)
	if err != nil {
		return done, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return done, interpret(err)
		}
		done = append(done, id)
	}
	return done, interpret(rows.Err())
}

// leasesJSON encodes leases as {"token":[id,…],…} for json_each, each
// token once: the statements then read the ids as plain integers and
// parse each group once, where [[id,token],…] had them parse one small
// array per lease. A Worker's batch holds the jobs of one or a few claims,
// so of one or a few tokens.
func leasesJSON(leases []queue.Lease) string {
	b := make([]byte, 0, 2+len(leases)*12)
	b = append(b, '{')
	var seen []int64 // the tokens written
	for i, l := range leases {
		if slices.Contains(seen, l.Token) {
			continue
		}
		if len(seen) > 0 {
			b = append(b, ',')
		}
		seen = append(seen, l.Token)
		b = append(b, '"')
		b = strconv.AppendInt(b, l.Token, 10)
		b = append(b, '"', ':', '[')
		b = strconv.AppendInt(b, l.ID, 10)
		for _, m := range leases[i+1:] {
			if m.Token == l.Token {
				b = append(b, ',')
				b = strconv.AppendInt(b, m.ID, 10)
			}
		}
		b = append(b, ']')
	}
	return string(append(b, '}'))
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, '1')
	}
	return append(b, '0')
}

// retriesJSON encodes retries as [[id,token,delay_us,error,dead,snooze],…].
func retriesJSON(retries []queue.RetryParams) string {
	b := make([]byte, 0, 2+len(retries)*48)
	b = append(b, '[')
	for i, r := range retries {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, r.Lease.ID, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, r.Lease.Token, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, r.Delay.Microseconds(), 10)
		b = append(b, ',')
		msg, _ := json.Marshal(truncate(r.Error, queue.MaxErrorBytes)) // a string always marshals
		b = append(b, msg...)
		b = append(b, ',')
		b = appendBool(b, r.Dead)
		b = append(b, ',')
		b = appendBool(b, r.Snooze)
		b = append(b, ']')
	}
	return string(append(b, ']'))
}

// truncate cuts s to at most max bytes without splitting a UTF-8 sequence.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && cut > max-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// Close gives back every job this claimer still holds (those whose lease
// it lost stay with their new holder) and closes the claimer. It does not
// wait for a Claim in flight: that claim gives back what it took and
// returns queue.ErrClosed. Further calls return queue.ErrClosed.
func (c *Claimer) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed.Swap(true) {
		c.mu.Unlock()
		return queue.ErrClosed
	}
	leases := make([]queue.Lease, 0, len(c.held))
	for id, tok := range c.held {
		leases = append(leases, queue.Lease{ID: id, Token: tok})
	}
	clear(c.held)
	c.mu.Unlock()
	if len(leases) == 0 || c.d.closed.Load() {
		return nil
	}
	_, err := c.d.batch(ctx, c.d.stmts.release, leasesJSON(leases))
	return err
}

// abandon makes c behave like a claimer whose process died: Close gives
// nothing back, so its jobs return only when their leases expire. Its
// other calls still work, as a zombie's would, and meet ErrLeaseLost once
// the jobs are taken back.
func (c *Claimer) abandon() {
	c.abandoned.Store(true)
	c.mu.Lock()
	clear(c.held)
	c.mu.Unlock()
}
