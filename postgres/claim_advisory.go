package postgres

// The advisory claimer (Strategy Advisory): claims, completions, retries,
// releases and lock checks. Where a walk starts is in advisory_walk.go; the
// session that holds the locks in advisory_session.go.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AdvisoryClaimer claims jobs with session advisory locks, one per row
// along the claim index and then a post-check, on a connection of its own,
// taken from the pool by NewClaimer and given back, with no lock left, by
// Close. A claimed job's row is not written: the lock
// is the claim, and it ends when the claimer unlocks it or its connection
// closes. Its methods run one at a time.
//
// Leases carry a token drawn at random for each connection. If the
// connection breaks, its locks are gone: every lease of that connection is
// lost (ErrLeaseLost), and the next Claim takes a new connection.
type AdvisoryClaimer struct {
	d *Driver

	mu     sync.Mutex
	conn   *pgxpool.Conn // nil once a broken connection is dropped
	pid    int32         // conn's server process, for messages
	mark   string        // the session's mark, which every statement checks (session.sql)
	token  int64
	held   map[int64]lockKey // jobs this connection holds, by id
	nss    map[int32]bool    // lock namespaces this connection has used
	closed bool

	// cheapHeadWalk is what a head walk may take before it counts as dear
	// (headGap); tests set it.
	cheapHeadWalk time.Duration
	// cursors says, per queue, where the next walk starts (see planWalk).
	cursors map[string]*cursor

	// prepared: a walk ran on conn, which has its statements prepared.
	prepared bool
	// oneTx: the session's transactions are READ COMMITTED by default,
	// so the walk and the post-check may share one (see walkChecked).
	oneTx bool

	postCheck bool
	dropped   atomic.Int64
	skipped   atomic.Int64
	swept     atomic.Int64 // stray locks released by sweep, for tests
}

var (
	_ queue.Claimer = (*AdvisoryClaimer)(nil)
)

// lockKey is a two-key advisory lock: the table's namespace and the job id
// folded to int4.
type lockKey struct{ ns, k int32 }

// fold is the second lock key of job id, as id::bit(32)::int4 computes it
// in SQL: the low 32 bits. Ids 2^32 apart share a key; that can only make a
// job look busy to other claimers, never hand it to two (see the post-check
// in Claim).
func fold(id int64) int32 { return int32(uint32(id)) }

func newAdvisoryClaimer(d *Driver) *AdvisoryClaimer {
	return &AdvisoryClaimer{d: d, postCheck: !d.noPostCheck, cheapHeadWalk: defaultCheapHeadWalk}
}

// openAdvisoryClaimer connects a new advisory claimer, checks that its
// session is its own and registers it for Close.
func (d *Driver) openAdvisoryClaimer(ctx context.Context) (*AdvisoryClaimer, error) {
	c := newAdvisoryClaimer(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.connect(ctx); err != nil {
		return nil, err
	}
	if err := advisoryLocksHold(c.conn.Conn().PgConn().ParameterStatus); err != nil {
		c.dropConn()
		return nil, err
	}
	if err := d.ownSession(ctx, c.pid); err != nil {
		c.dropConn()
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed.Load() {
		c.dropConn()
		return nil, queue.ErrClosed
	}
	d.claimers[c] = struct{}{}
	return c, nil
}

// PostCheckDropped counts the jobs this claimer locked and then let go
// because the post-check found them completed, retried or otherwise no
// longer ready: each one is a job that would have run twice without it.
func (c *AdvisoryClaimer) PostCheckDropped() int64 { return c.dropped.Load() }

// HeldSkipped counts the rows this claimer's walks passed because another
// session held them: how much claimers of one queue get in each other's
// way (Config.ClaimConcurrency bounds it within a process).
func (c *AdvisoryClaimer) HeldSkipped() int64 { return c.skipped.Load() }

// Claim returns up to n ready jobs of queue, each locked by this claimer
// alone, in (priority, run_at, id) order.
//
// It runs two statements on the claimer's connection. claim_advisory.sql
// walks the claim index and locks rows one by one until it has n, skipping
// rows other sessions hold. Then the post-check (postcheck.sql) reads the
// locked rows again and keeps only those still ready: a job another
// claimer completed or retried after the first statement's snapshot, and
// unlocked before this one's lock, is let go (counted in
// PostCheckDropped). The post-check sees such a change because claimers
// unlock only after their change has committed. Both go in one round trip
// (walkChecked).
//
// A claim cut off by ctx, or failing partway, releases whatever it locked
// before returning; a claim that finished before ctx ended returns its
// jobs.
func (c *AdvisoryClaimer) Claim(ctx context.Context, queueName string, n int) ([]*queue.Job, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: got %d", queue.ErrInvalidLimit, n)
	}
	if err := dialect.ValidateQueue(queueName); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, queue.ErrClosed
	}
	if ctx.Err() != nil {
		return nil, ctxErr("claim", ctx)
	}
	locked, jobs, err := c.lockChecked(ctx, queueName, min(n, math.MaxInt32))
	if err != nil {
		return nil, err
	}
	return c.keepChecked(queueName, locked, jobs)
}

// keepChecked ends a claim whose walk locked locked and whose post-check
// returned jobs: it records the jobs as held, lets go of the locked rows
// that failed the post-check, and returns the jobs. c.mu is held.
func (c *AdvisoryClaimer) keepChecked(queueName string, locked []lockedRow, jobs []*queue.Job) ([]*queue.Job, error) {
	if !c.postCheck {
		jobs = make([]*queue.Job, len(locked))
		for i, l := range locked {
			jobs[i] = &queue.Job{ID: l.ID, Queue: queueName, Priority: l.Priority, RunAt: l.RunAt, State: queue.StateReady}
		}
	}
	// The post-check may read the ids the walk recorded; only rows this
	// walk locked count (a stale record would name none of them).
	checked := make(map[int64]bool, len(jobs))
	for _, j := range jobs {
		checked[j.ID] = true
	}
	kept := jobs[:0]
	var nss, ks []int32
	for _, l := range locked {
		if checked[l.ID] {
			c.held[l.ID] = lockKey{l.NS, fold(l.ID)}
			delete(checked, l.ID)
		} else {
			nss, ks = append(nss, l.NS), append(ks, fold(l.ID))
		}
	}
	for _, j := range jobs {
		if !checked[j.ID] { // locked by this walk: no longer in checked
			kept = append(kept, j)
		}
	}
	jobs = kept
	c.dropped.Add(int64(len(nss)))
	if len(nss) > 0 {
		if err := c.unlock(nss, ks); err != nil {
			c.resync() // what it failed to unlock is not held: a sweep releases it
		}
	}
	if c.conn == nil {
		return nil, errors.New("dbq: postgres: claim: the claimer's connection broke; its jobs are claimable again")
	}
	for _, j := range jobs {
		j.State = queue.StateClaimed
		j.Token = c.token
	}
	slices.SortFunc(jobs, func(a, b *queue.Job) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.RunAt.Compare(b.RunAt), cmp.Compare(a.ID, b.ID))
	})
	return jobs, nil
}

// lockChecked walks and post-checks (walkChecked), taking a new connection
// when the claimer has none. A connection found dead on the way (an idle
// timeout or a proxy ended it while it held nothing) is replaced and the
// walk run again, once: it held no job, so nothing is lost. A resumed walk
// that finds nothing is followed by one from the head (planWalk, walked). It returns
// the rows locked and the jobs the post-check kept. c.mu is held.
func (c *AdvisoryClaimer) lockChecked(ctx context.Context, queueName string, n int) ([]lockedRow, []*queue.Job, error) {
	for try := 0; ; try++ {
		if c.conn == nil {
			if err := c.connect(ctx); err != nil {
				return nil, nil, err
			}
		}
		held := len(c.held)
		w := c.planWalk(queueName, n)
		for {
			prepared := c.prepared
			locked, jobs, took, err := c.walkChecked(ctx, w)
			if err != nil {
				c.resync()
				if try > 0 || held > 0 || c.conn != nil || ctx.Err() != nil {
					return nil, nil, err
				}
				c.d.log.Debug("dbq: postgres: the advisory claimer's idle connection was gone; claiming on a new one", "err", err)
				break
			}
			c.prepared = true
			if !c.walked(w, locked, took, prepared) {
				return locked, jobs, nil
			}
		}
	}
}

// unlock releases the given locks on a context of its own: a lock must go
// once the change it guarded has committed, whatever the caller's context.
// c.mu is held.
func (c *AdvisoryClaimer) unlock(nss, ks []int32) error {
	if c.broken() {
		return nil // the session and its locks are gone
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	// Query, not Exec: Exec copies every row it discards.
	rows, err := c.conn.Query(ctx, c.d.stmts.unlock, nss, ks, c.mark)
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

// release forgets the held jobs ids and unlocks them. c.mu is held.
func (c *AdvisoryClaimer) release(ids []int64) {
	nss := make([]int32, 0, len(ids))
	ks := make([]int32, 0, len(ids))
	for _, id := range ids {
		k, ok := c.held[id]
		if !ok {
			continue
		}
		delete(c.held, id)
		nss, ks = append(nss, k.ns), append(ks, k.k)
	}
	if len(nss) == 0 {
		return
	}
	if err := c.unlock(nss, ks); err != nil {
		c.resync()
	}
}

// start begins a Complete, Retry, Release or Extend: it checks the claimer
// and ctx and splits the leases into those this connection holds and the
// lost rest. c.mu is held.
func (c *AdvisoryClaimer) start(ctx context.Context, op string, leases []queue.Lease) ([]int64, error) {
	if c.closed {
		return nil, queue.ErrClosed
	}
	if ctx.Err() != nil {
		return nil, ctxErr(op, ctx)
	}
	var valid []int64
	for _, l := range leases {
		if _, ok := c.held[l.ID]; ok && l.Token == c.token && c.conn != nil {
			valid = append(valid, l.ID)
		}
	}
	return valid, nil
}

// Complete deletes the jobs, then, once the delete has committed, unlocks
// them, in one round trip (completeSteps). Leases this connection does not
// hold are reported lost.
func (c *AdvisoryClaimer) Complete(ctx context.Context, leases []queue.Lease) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	valid, err := c.start(ctx, "complete", leases)
	if err != nil || len(valid) == 0 {
		return cmp.Or(err, queue.LostLeases(leases, nil))
	}
	var r completion
	gctx, done := guard(ctx, c.conn.Conn().PgConn())
	errs := pipelined(gctx, c.conn.Conn(), c.completeSteps(valid, &r))
	done()
	unlock, sweep := c.completed(valid, &r, errs)
	c.release(unlock)
	if sweep {
		c.resync()
	}
	if err := r.err(errs); err != nil {
		if c.broken() {
			return queue.LostLeases(leases, nil)
		}
		return failed(ctx, "complete", err)
	}
	return queue.LostLeases(leases, r.done)
}

// completion is what completeSteps read: the jobs deleted and those
// unlocked.
type completion struct {
	done, unlocked []int64
}

// err is the delete's error among completeSteps' errors errs.
func (*completion) err(errs []error) error { return cmp.Or(errs[0], errs[1]) }

// unlockErr is the unlock's error among completeSteps' errors errs.
func (*completion) unlockErr(errs []error) error { return cmp.Or(errs[2], errs[3]) }

// completeSteps are the steps that complete the held jobs valid, reading
// into r: the delete (complete_advisory.sql, after plan.sql), then, in a
// transaction of its own, the unlock of those of them no longer ready
// (unlock_completed.sql) - all of them once the delete has committed,
// none if it failed. c.mu is held.
func (c *AdvisoryClaimer) completeSteps(valid []int64, r *completion) []step {
	nss := make([]int32, len(valid))
	for i, id := range valid {
		nss[i] = c.held[id].ns
	}
	return append(c.d.planned(c.d.stmts.completeAdvisory, []any{valid, c.mark}, func(rows pgx.Rows) (err error) {
		r.done, err = readIDs(rows)
		return err
	}), c.d.planned(c.d.stmts.unlockCompleted, []any{nss, valid, c.mark}, func(rows pgx.Rows) (err error) {
		r.unlocked, err = readIDs(rows)
		return err
	})...)
}

// completed settles the held jobs valid after completeSteps ran with
// errors errs: those unlocked are forgotten, and when the delete
// committed, the rest (none, unless the unlock failed partway) are
// returned to unlock. sweep says the unlock failed, leaving which locks
// went unknown. c.mu is held.
func (c *AdvisoryClaimer) completed(valid []int64, r *completion, errs []error) (unlock []int64, sweep bool) {
	deleted := r.err(errs) == nil
	if r.unlockErr(errs) != nil {
		if deleted {
			for _, id := range valid {
				delete(c.held, id)
			}
		}
		return nil, true
	}
	for _, id := range r.unlocked {
		delete(c.held, id)
	}
	if !deleted {
		return nil, false
	}
	for _, id := range valid {
		if _, ok := c.held[id]; ok {
			unlock = append(unlock, id)
		}
	}
	return unlock, false
}

// Retry records the failures (retry_advisory.sql), then, once that has
// committed, unlocks the jobs. Leases this connection does not hold are
// reported lost.
func (c *AdvisoryClaimer) Retry(ctx context.Context, retries []queue.RetryParams) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	leases := make([]queue.Lease, len(retries))
	for i, r := range retries {
		leases[i] = r.Lease
	}
	valid, err := c.start(ctx, "retry", leases)
	if err != nil || len(valid) == 0 {
		return cmp.Or(err, queue.LostLeases(leases, nil))
	}
	ok := make(map[int64]bool, len(valid))
	for _, id := range valid {
		ok[id] = true
	}
	var (
		ids    []int64
		delays []int64
		errs   []string
		dead   []bool
		snooze []bool
	)
	for _, r := range retries {
		if ok[r.Lease.ID] {
			ids = append(ids, r.Lease.ID)
			delays = append(delays, max(r.Delay, 0).Microseconds())
			errs = append(errs, errorText(r.Error))
			dead = append(dead, r.Dead)
			snooze = append(snooze, r.Snooze)
		}
	}
	done, err := c.d.plannedIDs(ctx, c.conn.Conn(), true, c.d.stmts.retryAdvisory, ids, delays, errs, dead, snooze, c.mark)
	if err != nil {
		if c.broken() {
			return queue.LostLeases(leases, nil)
		}
		return failed(ctx, "retry", err)
	}
	c.release(valid)
	return queue.LostLeases(leases, done)
}

// Release unlocks the jobs: they are claimable again at once, attempt
// unchanged. Leases this connection does not hold are reported lost.
func (c *AdvisoryClaimer) Release(ctx context.Context, leases []queue.Lease) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	valid, err := c.start(ctx, "release", leases)
	if err != nil {
		return err
	}
	c.release(valid)
	// Released jobs keep their place, likely behind the resume points:
	// the next walks start at the head.
	clear(c.cursors)
	c.d.fronts.clear()
	return queue.LostLeases(leases, valid)
}

// Heartbeat is a third of Config.LockCheck: how often a Worker calls
// Extend, which checks the claimer's connection, while it holds jobs of
// this claimer (queue.Claimer).
func (c *AdvisoryClaimer) Heartbeat() time.Duration { return c.d.cfg.LockCheck / 3 }

// Extend checks that the leases are still this claimer's: advisory claims
// last as long as the connection, so there is nothing to renew, but the
// connection must still be there. It pings it (which also keeps idle
// timeouts from ending the session). A ping that fails, or does not answer
// by ctx's deadline (cleanupTimeout when ctx has none), ends the
// connection: its locks may already be gone, and closing it makes sure
// they are, so every lease of it is reported lost and no other claimer
// can take a job this one's Worker still thinks it holds for longer than
// the check takes. A ctx cancelled without a deadline does not cut the
// ping short, and the ping has at least a third of Config.LockCheck from
// when it is sent, past ctx's deadline if need be: time spent waiting for
// a claim or a completion on the same connection to finish says nothing
// about the connection, and judging it by a ping sent with no time left
// would end a healthy session and give its running jobs to other workers.
func (c *AdvisoryClaimer) Extend(ctx context.Context, leases []queue.Lease) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	valid, err := c.start(ctx, "extend", leases)
	if err != nil || len(valid) == 0 {
		return cmp.Or(err, queue.LostLeases(leases, nil))
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(cleanupTimeout)
	}
	if least := time.Now().Add(c.d.cfg.LockCheck / 3); deadline.Before(least) {
		deadline = least
	}
	pctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	err = c.conn.Conn().Ping(pctx)
	cancel()
	if err != nil {
		c.d.log.Warn("dbq: postgres: the advisory claimer's connection failed its check; its jobs' claims are lost",
			"jobs", len(c.held), "err", err)
		c.dropConn()
		return queue.LostLeases(leases, nil)
	}
	return queue.LostLeases(leases, valid)
}

// Close unlocks every job still held, so they are claimable at once, and
// gives the connection back to the pool holding no lock (or closes it, if
// the unlock fails). Further calls return queue.ErrClosed.
func (c *AdvisoryClaimer) Close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return queue.ErrClosed
	}
	c.closed = true
	c.d.forget(c)
	if c.conn == nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if _, err := c.conn.Exec(cctx, c.d.stmts.unlockAll, c.mark); err != nil {
		c.dropConn() // closing the session releases its locks all the same
		return nil
	}
	c.conn.Release()
	c.conn, c.held, c.nss = nil, nil, nil
	return nil
}
