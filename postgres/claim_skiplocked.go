package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// SkipLockedClaimer claims jobs by marking their rows claimed with a lease
// and a token (claim_skiplocked.sql), in one autocommit statement that
// skips rows other claims are locking. It keeps no connection or session
// state between calls, so it works behind PgBouncer in transaction mode.
// A claim lasts Config.Lease unless extended; expired leases go back to
// ready through a bounded rescue statement that Claim runs at most every
// quarter lease, or [Driver.Rescue]. It is safe for concurrent use.
type SkipLockedClaimer struct {
	d *Driver

	mu        sync.Mutex
	held      map[int64]int64 // id → token of the claims this claimer made, for Close
	closed    atomic.Bool     // set under mu, read without it by check
	abandoned bool
	starts    map[string]*claimStart // by queue name; guarded by mu
}

// claimStart is where a claimer's next claim on a queue begins.
type claimStart struct {
	from   *queue.Job // the first job of its last full claim; nil: the head
	claims int
}

var (
	_ queue.Claimer         = (*SkipLockedClaimer)(nil)
	_ queue.CompleteClaimer = (*SkipLockedClaimer)(nil)
)

func newSkipLockedClaimer(d *Driver) *SkipLockedClaimer {
	return &SkipLockedClaimer{d: d, held: map[int64]int64{}, starts: map[string]*claimStart{}}
}

// LeaseDuration returns Config.Lease: the Worker extends running jobs every
// third of it.
func (c *SkipLockedClaimer) LeaseDuration() time.Duration { return c.d.cfg.Lease }

// Heartbeat is a third of the lease: how often a Worker extends the
// leases of the jobs it holds (queue.Claimer).
func (c *SkipLockedClaimer) Heartbeat() time.Duration { return c.d.cfg.Lease / 3 }

// run runs a statement returning ids on a connection of the pool, under
// guard: a cancelled ctx stops it with a cancel request, so whether it took
// effect is always known.
func (c *SkipLockedClaimer) run(ctx context.Context, op, sql string, args ...any) ([]int64, error) {
	conn, err := c.d.pool.Acquire(ctx)
	if err != nil {
		return nil, interpret(op, err)
	}
	defer conn.Release()
	ids, err := c.d.plannedIDs(ctx, conn.Conn(), c.d.cachesStatements(), sql, args...)
	if err != nil {
		return nil, failed(ctx, op, err)
	}
	return ids, nil
}

func (c *SkipLockedClaimer) check(ctx context.Context, op string) error {
	if c.closed.Load() || c.d.closed.Load() {
		return queue.ErrClosed
	}
	if ctx.Err() != nil {
		return ctxErr(op, ctx)
	}
	return nil
}

// Claim returns up to n ready jobs of queue, claimed for Config.Lease with
// a fresh token, in (priority, run_at, id) order. A claim cut off by ctx is
// rolled back by the server, or it had finished and its jobs are returned.
// A claim that Close overtakes gives back the jobs it took and returns
// queue.ErrClosed: Close cannot see jobs before the claim returns them.
func (c *SkipLockedClaimer) Claim(ctx context.Context, queueName string, n int) ([]*queue.Job, error) {
	if err := c.claimable(ctx, queueName, n); err != nil {
		return nil, err
	}
	token := rand.Int64N(math.MaxInt64-1) + 1
	from := c.from(queueName)
	jobs, err := c.claim(ctx, queueName, n, token, from)
	return c.claimed(ctx, queueName, n, token, from, jobs, err)
}

// claimable checks a claim's arguments and the claimer, and runs the
// rescue of expired leases when it is due.
func (c *SkipLockedClaimer) claimable(ctx context.Context, queueName string, n int) error {
	if n <= 0 {
		return fmt.Errorf("%w: got %d", queue.ErrInvalidLimit, n)
	}
	if err := dialect.ValidateQueue(queueName); err != nil {
		return err
	}
	if err := c.check(ctx, "claim"); err != nil {
		return err
	}
	if err := c.d.maybeRescue(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, queue.ErrNotMigrated) {
		c.d.log.Warn("dbq: postgres: rescue of expired leases failed", "err", err)
	}
	return nil
}

// claimed finishes a claim from from that returned jobs or err: one that
// found nothing past from looks again from the head, and the jobs are
// recorded as held and sorted in claim order.
func (c *SkipLockedClaimer) claimed(ctx context.Context, queueName string, n int, token int64, from *queue.Job,
	jobs []*queue.Job, err error) ([]*queue.Job, error) {
	if err == nil && len(jobs) == 0 && from != nil {
		// Nothing past where the last claim began: look from the head.
		jobs, err = c.claim(ctx, queueName, n, token, nil)
	}
	if err != nil {
		return nil, err
	}
	// The claim's connection is back in the pool by now, so keep can give
	// the jobs back even through a pool of one connection.
	if err := c.keep(ctx, jobs, token); err != nil {
		return nil, err
	}
	slices.SortFunc(jobs, func(a, b *queue.Job) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.RunAt.Compare(b.RunAt), cmp.Compare(a.ID, b.ID))
	})
	c.began(queueName, jobs, n)
	return jobs, nil
}

// from returns where the next claim on queue begins: nil for the head.
//
// Until vacuum, the claim index keeps an entry for each job claimed since,
// at the head of its priority, and a claim from the head reads past all of
// them: claims slow down the longer a busy queue goes without vacuum. So
// after a claim that filled its batch, the next starts in that priority at
// the first job the claim took; jobs before it were then taken or locked
// by others. Lower priorities are always read from their start, so a new
// urgent job is never passed over.
func (c *SkipLockedClaimer) from(queueName string) *queue.Job {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.starts[queueName]
	if st == nil {
		return nil
	}
	st.claims++
	if st.claims%resumeEvery == 0 {
		return nil
	}
	return st.from
}

// began records where a claim of n that took jobs (in claim order) began.
// One that did not fill its batch leaves the next to start at the head.
func (c *SkipLockedClaimer) began(queueName string, jobs []*queue.Job, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.starts[queueName]
	if st == nil {
		if len(c.starts) >= maxClaimStarts {
			clear(c.starts)
		}
		st = &claimStart{}
		c.starts[queueName] = st
	}
	st.from = nil
	if len(jobs) == n && n > 0 {
		j := jobs[0]
		st.from = &queue.Job{Priority: j.Priority, RunAt: j.RunAt, ID: j.ID}
	}
}

// maxClaimStarts bounds the queues a claimer remembers a start for.
const maxClaimStarts = 1024

// claim runs claim_skiplocked.sql from a start (nil: the head) on a
// connection of the pool, under guard, and returns the jobs it claimed
// with token.
func (c *SkipLockedClaimer) claim(ctx context.Context, queueName string, n int, token int64, from *queue.Job) ([]*queue.Job, error) {
	conn, err := c.d.pool.Acquire(ctx)
	if err != nil {
		return nil, interpret("claim", err)
	}
	defer conn.Release()
	if c.closed.Load() {
		return nil, queue.ErrClosed
	}
	gctx, done := guard(ctx, conn.Conn().PgConn())
	defer done()
	if !c.d.cachesStatements() {
		rows, err := conn.Query(gctx, c.d.stmts.claimSkipLocked, c.claimArgs(queueName, n, token, from)...)
		if err != nil {
			return nil, failed(ctx, "claim", err)
		}
		jobs, err := readClaimed(rows, token)
		if err != nil {
			return nil, failed(ctx, "claim", err)
		}
		return jobs, nil
	}
	var jobs []*queue.Job
	errs := pipelined(gctx, conn.Conn(), c.claimSteps(queueName, n, token, from, &jobs))
	if err := cmp.Or(errs...); err != nil {
		return nil, failed(ctx, "claim", err)
	}
	return jobs, nil
}

// claimSteps are the steps of a pipeline that claim: plan.sql's
// planner settings, then claim_skiplocked.sql in the same transaction,
// its jobs read into jobs.
func (c *SkipLockedClaimer) claimSteps(queueName string, n int, token int64, from *queue.Job, jobs *[]*queue.Job) []step {
	return c.d.planned(c.d.stmts.claimSkipLocked, c.claimArgs(queueName, n, token, from), func(rows pgx.Rows) (err error) {
		*jobs, err = readClaimed(rows, token)
		return err
	})
}

// claimArgs are claim_skiplocked.sql's arguments for a claim from a start
// (nil: the head).
func (c *SkipLockedClaimer) claimArgs(queueName string, n int, token int64, from *queue.Job) []any {
	priority, runAt, fromID := headPriority, headRunAt, int64(0)
	if from != nil {
		priority, runAt, fromID = from.Priority, pgtype.Timestamptz{Time: from.RunAt, Valid: true}, from.ID
	}
	return []any{queueName, int64(n), token, c.d.leaseUS, priority, runAt, fromID}
}

// readClaimed reads the jobs claim_skiplocked.sql claimed with token.
func readClaimed(rows pgx.Rows, token int64) ([]*queue.Job, error) {
	r := &jobRow{j: queue.Job{State: queue.StateClaimed, Token: token}}
	j := &r.j
	return readJobs(rows, r, []any{&j.ID, &j.Queue, &j.Payload, &j.Priority, &j.RunAt, &r.attempt, &r.maxAtt,
		&j.ClaimedUntil, &r.lastError, &r.dedupe, &j.CreatedAt, &j.Kind})
}

// CompleteClaim completes p.Complete and claims up to p.N jobs of p.Queue
// in one round trip (queue.CompleteClaimer): complete_skiplocked.sql and
// claim_skiplocked.sql pipelined on one connection, each committed on its
// own, so a failed claim leaves the completions done. Each part's outcome
// is what Complete and Claim report. With a pool whose exec mode is not
// pgx's default (cache_statement), it calls Complete and then Claim.
func (c *SkipLockedClaimer) CompleteClaim(ctx context.Context, p queue.CompleteClaimParams) queue.CompleteClaimResult {
	var res queue.CompleteClaimResult
	if len(p.Complete) == 0 || !c.d.cachesStatements() {
		res.CompleteErr = c.Complete(ctx, p.Complete)
		res.Jobs, res.ClaimErr = c.Claim(ctx, p.Queue, p.N)
		return res
	}
	if err := c.check(ctx, "complete"); err != nil {
		res.CompleteErr = err
		res.Jobs, res.ClaimErr = c.Claim(ctx, p.Queue, p.N)
		return res
	}
	if err := c.claimable(ctx, p.Queue, p.N); err != nil {
		res.CompleteErr, res.ClaimErr = c.Complete(ctx, p.Complete), err
		return res
	}
	token := rand.Int64N(math.MaxInt64-1) + 1
	from := c.from(p.Queue)
	conn, err := c.d.pool.Acquire(ctx)
	if err != nil {
		err = interpret("claim", err)
		res.CompleteErr, res.ClaimErr = err, err
		return res
	}
	if c.closed.Load() {
		conn.Release()
		res.CompleteErr, res.ClaimErr = queue.ErrClosed, queue.ErrClosed
		return res
	}
	ids, tokens := leaseArrays(p.Complete)
	var done []int64
	gctx, stop := guard(ctx, conn.Conn().PgConn())
	errs := pipelined(gctx, conn.Conn(), append(c.d.planned(c.d.stmts.completeSkipLocked, []any{ids, tokens}, func(rows pgx.Rows) (err error) {
		done, err = readIDs(rows)
		return err
	}), c.claimSteps(p.Queue, p.N, token, from, &res.Jobs)...))
	stop()
	conn.Release()
	// Two transactions of two steps each: settings, then the statement.
	errs[0], errs[1] = cmp.Or(errs[0], errs[1]), cmp.Or(errs[2], errs[3])
	if errs[0] != nil {
		res.CompleteErr = failed(ctx, "complete", errs[0])
	} else {
		c.forget(p.Complete, done, false)
		res.CompleteErr = queue.LostLeases(p.Complete, done)
	}
	if errs[1] != nil {
		res.Jobs, errs[1] = nil, failed(ctx, "claim", errs[1])
	}
	res.Jobs, res.ClaimErr = c.claimed(ctx, p.Queue, p.N, token, from, res.Jobs, errs[1])
	return res
}

// keep records the jobs a claim took as held, so that Close gives them
// back. When Close has run meanwhile — it sets closed under c.mu, so it
// either saw these jobs or they see closed here — keep gives them back
// itself and returns queue.ErrClosed.
func (c *SkipLockedClaimer) keep(ctx context.Context, jobs []*queue.Job, token int64) error {
	c.mu.Lock()
	closed, abandoned := c.closed.Load(), c.abandoned
	if !closed {
		for _, j := range jobs {
			c.held[j.ID] = token
		}
	}
	c.mu.Unlock()
	if !closed {
		return nil
	}
	if abandoned || len(jobs) == 0 || c.d.closed.Load() {
		return queue.ErrClosed
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := c.releaseLeases(cctx, queue.Leases(jobs)); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
		return fmt.Errorf("%w; giving back the jobs its last claim took: %w", queue.ErrClosed, err)
	}
	return queue.ErrClosed
}

// forget drops leases from the claimer's record once they have ended or
// were found lost (keep false), or keeps those still current (keep true
// for Extend).
func (c *SkipLockedClaimer) forget(leases []queue.Lease, done []int64, keepDone bool) {
	var ok map[int64]bool
	if keepDone {
		ok = make(map[int64]bool, len(done))
		for _, id := range done {
			ok[id] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range leases {
		if c.held[l.ID] != l.Token {
			continue
		}
		if !keepDone || !ok[l.ID] {
			delete(c.held, l.ID)
		}
	}
}

func leaseArrays(leases []queue.Lease) (ids, tokens []int64) {
	ids = make([]int64, len(leases))
	tokens = make([]int64, len(leases))
	for i, l := range leases {
		ids[i], tokens[i] = l.ID, l.Token
	}
	return ids, tokens
}

// Complete deletes the jobs whose leases are current; the others are
// reported lost.
func (c *SkipLockedClaimer) Complete(ctx context.Context, leases []queue.Lease) error {
	if err := c.check(ctx, "complete"); err != nil {
		return err
	}
	if len(leases) == 0 {
		return nil
	}
	ids, tokens := leaseArrays(leases)
	done, err := c.run(ctx, "complete", c.d.stmts.completeSkipLocked, ids, tokens)
	if err != nil {
		return err
	}
	c.forget(leases, done, false)
	return queue.LostLeases(leases, done)
}

// Retry records the failures of jobs whose leases are current: attempt+1,
// run_at = now + Delay, error kept, dead after max_attempts or when asked.
// The others are reported lost.
func (c *SkipLockedClaimer) Retry(ctx context.Context, retries []queue.RetryParams) error {
	if err := c.check(ctx, "retry"); err != nil {
		return err
	}
	if len(retries) == 0 {
		return nil
	}
	var (
		leases = make([]queue.Lease, len(retries))
		ids    = make([]int64, len(retries))
		tokens = make([]int64, len(retries))
		delays = make([]int64, len(retries))
		errs   = make([]string, len(retries))
		dead   = make([]bool, len(retries))
		snooze = make([]bool, len(retries))
	)
	for i, r := range retries {
		leases[i] = r.Lease
		ids[i], tokens[i] = r.Lease.ID, r.Lease.Token
		delays[i] = max(r.Delay, 0).Microseconds()
		errs[i] = errorText(r.Error)
		dead[i] = r.Dead
		snooze[i] = r.Snooze
	}
	done, err := c.run(ctx, "retry", c.d.stmts.retrySkipLocked, ids, tokens, delays, errs, dead, snooze)
	if err != nil {
		return err
	}
	c.forget(leases, done, false)
	return queue.LostLeases(leases, done)
}

// Release gives jobs whose leases are current back to ready, attempt
// unchanged. The others are reported lost.
func (c *SkipLockedClaimer) Release(ctx context.Context, leases []queue.Lease) error {
	if err := c.check(ctx, "release"); err != nil {
		return err
	}
	return c.releaseLeases(ctx, leases)
}

func (c *SkipLockedClaimer) releaseLeases(ctx context.Context, leases []queue.Lease) error {
	if len(leases) == 0 {
		return nil
	}
	ids, tokens := leaseArrays(leases)
	done, err := c.run(ctx, "release", c.d.stmts.release, ids, tokens)
	if err != nil {
		return err
	}
	c.forget(leases, done, false)
	return queue.LostLeases(leases, done)
}

// Extend renews leases that are current to now + Config.Lease on the
// database clock. The others are reported lost.
func (c *SkipLockedClaimer) Extend(ctx context.Context, leases []queue.Lease) error {
	if err := c.check(ctx, "extend"); err != nil {
		return err
	}
	if len(leases) == 0 {
		return nil
	}
	ids, tokens := leaseArrays(leases)
	done, err := c.run(ctx, "extend", c.d.stmts.extend, ids, tokens, c.d.leaseUS)
	if err != nil {
		return err
	}
	c.forget(leases, done, true)
	return queue.LostLeases(leases, done)
}

// Close gives back the jobs this claimer still holds (those whose lease
// was lost stay with their new holder). It does not wait for a Claim in
// flight: that claim gives back what it took and returns queue.ErrClosed.
// Further calls return queue.ErrClosed.
func (c *SkipLockedClaimer) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed.Swap(true) {
		c.mu.Unlock()
		return queue.ErrClosed
	}
	leases := make([]queue.Lease, 0, len(c.held))
	for id, token := range c.held {
		leases = append(leases, queue.Lease{ID: id, Token: token})
	}
	abandoned := c.abandoned
	c.mu.Unlock()
	if abandoned || len(leases) == 0 || c.d.closed.Load() {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := c.releaseLeases(cctx, leases); err != nil && !errors.Is(err, queue.ErrLeaseLost) {
		return err
	}
	return nil
}

// abandon makes the claimer behave like one whose process died: Close
// gives nothing back. For tests.
func (c *SkipLockedClaimer) abandon() {
	c.mu.Lock()
	c.abandoned = true
	c.mu.Unlock()
}
