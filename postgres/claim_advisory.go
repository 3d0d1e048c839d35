package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
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
	_ queue.Claimer   = (*AdvisoryClaimer)(nil)
	_ queue.LockCheck = (*AdvisoryClaimer)(nil)
)

// cursor is where a queue's next walk starts when other sessions hold its
// head (resume; nil: at the head), and the count of its walks, so that
// every resumeEvery-th one starts at the head again. Each queue has its
// own: a claimer that works several queues walks each from its head as
// often as one that works only that queue.
type cursor struct {
	resume *lockedRow
	claims int
	// notHeadBefore spaces out the periodic walks from the head when they
	// cost much (see headGap). Zero: no wait.
	notHeadBefore time.Time
	// resumed is what the last walk from a resume point took.
	resumed time.Duration
}

// headGap is how long a claimer puts off its next walk from the head after
// one that took took, when the last walk from its resume point took
// resumed: nine times as long, so that head walks cost at most a tenth of
// a busy claimer's time, up to maxHeadGap. A head walk reads the claim
// index's entries of every job completed since vacuum last came by — all
// of them while a long transaction holds the MVCC horizon, when one walk
// can take a second — and a claimer that walked from the head on every
// 16th claim of a backlog then spent most of its time there. Jobs behind
// the resume point (given back by another claimer, due since) wait up to
// the gap longer; a resumed walk that finds nothing still walks from the
// head at once. A head walk is dear only when it took at least
// cheapHeadWalk and four times the resumed walk: a server or client slowed
// down as a whole (load, a pause) slows both alike, and then the count
// rule alone holds.
func headGap(took, resumed time.Duration) time.Duration {
	if took < cheapHeadWalk || took < 4*resumed {
		return 0
	}
	return min(9*took, maxHeadGap)
}

var (
	cheapHeadWalk = 2 * time.Millisecond // a variable for tests
	maxHeadGap    = 5 * time.Second
)

// maxCursors bounds the queues a claimer keeps cursors for; past it they
// are all forgotten, which only makes the next walks start at the head.
const maxCursors = 1024

// lockKey is a two-key advisory lock: the table's namespace and the job id
// folded to int4.
type lockKey struct{ ns, k int32 }

// fold is the second lock key of job id, as id::bit(32)::int4 computes it
// in SQL: the low 32 bits. Ids 2^32 apart share a key; that can only make a
// job look busy to other claimers, never hand it to two (see the post-check
// in Claim).
func fold(id int64) int32 { return int32(uint32(id)) }

func newAdvisoryClaimer(d *Driver) *AdvisoryClaimer {
	return &AdvisoryClaimer{d: d, postCheck: !d.noPostCheck}
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

// connect takes a connection from the pool and starts a new lease session
// on it. c.mu is held.
func (c *AdvisoryClaimer) connect(ctx context.Context) error {
	conn, err := c.d.pool.Acquire(ctx)
	if err != nil {
		return interpret("acquire connection", err)
	}
	c.conn = conn
	c.prepared = false
	c.token = rand.Int64N(math.MaxInt64-1) + 1
	c.mark = strconv.FormatInt(c.token, 36)
	c.held = map[int64]lockKey{}
	c.nss = map[int32]bool{}
	if err := c.markSession(ctx); err != nil {
		c.dropConn()
		return err
	}
	if err := c.lookupNamespace(ctx); err != nil {
		c.dropConn()
		return err
	}
	return nil
}

// markSession makes the connection's session the claimer's own
// (session.sql), or refuses it with queue.ErrUnsupportedServer when
// another client shares it. c.mu is held.
func (c *AdvisoryClaimer) markSession(ctx context.Context) error {
	gctx, done := guard(ctx, c.conn.Conn().PgConn())
	defer done()
	var (
		marked    bool
		isolation string
	)
	if err := c.conn.QueryRow(gctx, c.d.stmts.session, c.mark, c.d.stmts.table).Scan(&c.pid, &marked, &isolation); err != nil {
		return failed(ctx, "take a session", err)
	}
	c.oneTx = isolation == "read committed"
	if !marked {
		return fmt.Errorf("%w: postgres: the session of server process %d already holds another advisory claimer's locks or mark; %s",
			queue.ErrUnsupportedServer, c.pid, adviceAdvisory)
	}
	return nil
}

// lookupNamespace learns the table's lock namespace (its oid), when it
// exists. c.mu is held.
func (c *AdvisoryClaimer) lookupNamespace(ctx context.Context) error {
	gctx, done := guard(ctx, c.conn.Conn().PgConn())
	defer done()
	var (
		pid int32
		ns  pgtype.Int4
	)
	if err := c.conn.QueryRow(gctx, c.d.stmts.namespace, c.d.stmts.table).Scan(&pid, &ns); err != nil {
		return failed(ctx, "look up the jobs table", err)
	}
	if ns.Valid {
		c.nss[ns.Int32] = true
	}
	return nil
}

// dropConn closes the connection, which ends its session and with it every
// lock it holds, and forgets its leases. c.mu is held.
func (c *AdvisoryClaimer) dropConn() {
	if c.conn == nil {
		return
	}
	pc := c.conn
	c.conn = nil
	c.held, c.nss = nil, nil
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	_ = pc.Conn().Close(ctx)
	cancel()
	pc.Release() // a closed connection is destroyed, not pooled
}

// broken reports whether c's connection is gone, dropping it if so.
// c.mu is held.
func (c *AdvisoryClaimer) broken() bool {
	if c.conn == nil {
		return true
	}
	if c.conn.Conn().IsClosed() {
		c.dropConn()
		return true
	}
	return false
}

// settle restores the invariant that the connection holds the locks of
// exactly the jobs in c.held, after a statement failed or was cut off
// partway (session locks survive a cancelled statement): it finds the
// session's locks in pg_locks and releases those that are not held jobs'.
// It runs on a context of its own. If that fails, the connection is
// dropped, which releases everything. c.mu is held.
func (c *AdvisoryClaimer) settle() {
	if c.broken() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var err error
	for range 3 {
		if err = c.sweep(ctx); err == nil {
			return
		}
		if c.broken() {
			return
		}
	}
	c.d.log.Warn("dbq: postgres: could not release stray advisory locks; dropping the connection", "err", err)
	c.dropConn()
}

// sweep releases this session's advisory locks in our namespaces that no
// held job accounts for. c.mu is held.
func (c *AdvisoryClaimer) sweep(ctx context.Context) error {
	if err := c.lookupNamespace(ctx); err != nil && !errors.Is(err, queue.ErrNotMigrated) {
		return err
	}
	mine := make(map[lockKey]bool, len(c.held))
	for _, k := range c.held {
		mine[k] = true
	}
	for range 3 {
		rows, err := c.conn.Query(ctx, c.d.stmts.heldLocks, c.mark)
		if err != nil {
			return err
		}
		locks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (lockKey, error) {
			var l lockKey
			err := r.Scan(&l.ns, &l.k)
			return l, err
		})
		if err != nil {
			return err
		}
		var nss, ks []int32
		for _, l := range locks {
			if c.nss[l.ns] && !mine[l] {
				nss, ks = append(nss, l.ns), append(ks, l.k)
			}
		}
		if len(nss) == 0 {
			return nil
		}
		// A stray lock may be held more than once; look again after.
		if _, err := c.conn.Exec(ctx, c.d.stmts.unlock, nss, ks, c.mark); err != nil {
			return err
		}
		c.swept.Add(int64(len(nss)))
	}
	return errors.New("dbq: postgres: advisory locks keep coming back")
}

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
			c.settle() // what it failed to unlock is not held: a sweep releases it
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
				c.settle()
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

// walkChecked runs walk w and the post-check in one round trip and one
// transaction: under READ COMMITTED each statement reads a snapshot of its
// own, so the post-check's is taken after the walk's locks (see Claim),
// and it reads the ids the walk locked from a setting local to that
// transaction (dbq.walked), which ends with it. A session whose
// transactions default to another isolation level runs the post-check in
// a transaction of its own, a round trip later, given the ids.
//
// It returns the rows the walk locked, the jobs the post-check kept, what
// the walk took (to the end of its results) and the first error. c.mu is
// held.
func (c *AdvisoryClaimer) walkChecked(ctx context.Context, w *walkPlan) ([]lockedRow, []*queue.Job, time.Duration, error) {
	var (
		locked []lockedRow
		jobs   []*queue.Job
		end    time.Time
	)
	readJobs := func(rows pgx.Rows) (err error) {
		jobs, err = readChecked(rows)
		return err
	}
	steps := c.walkSteps(w, &locked)
	walk := &steps[len(steps)-1]
	read := walk.read
	walk.read = func(rows pgx.Rows) error {
		defer func() { end = time.Now() }()
		return read(rows)
	}
	together := c.postCheck && c.oneTx
	if together {
		walk.chained = true
		steps = append(steps, step{sql: c.d.stmts.postcheck, args: []any{nil, c.mark}, read: readJobs})
	}
	gctx, done := guard(ctx, c.conn.Conn().PgConn())
	defer done()
	start := time.Now()
	err := cmp.Or(pipelined(gctx, c.conn.Conn(), steps)...)
	for _, l := range locked {
		c.nss[l.NS] = true // so that a sweep after a failed post-check finds them
	}
	if err == nil && c.postCheck && !together && len(locked) > 0 {
		ids := make([]int64, len(locked))
		for i, l := range locked {
			ids[i] = l.ID
		}
		err = cmp.Or(pipelined(gctx, c.conn.Conn(), c.d.planned(c.d.stmts.postcheck, []any{ids, c.mark}, readJobs))...)
	}
	if err != nil {
		return nil, nil, 0, failed(ctx, "claim", err)
	}
	return locked, jobs, end.Sub(start), nil
}

// lockedRow is a row claim_advisory.sql locked, with the count of rows its
// walk passed before it because other sessions held them.
type lockedRow struct {
	ID       int64
	NS       int32
	Priority int16
	RunAt    time.Time
	Skipped  int32
}

// walkPlan is one walk's arguments: from is where it starts (nil: at the
// head of the queue).
type walkPlan struct {
	queue   string
	heldIDs []int64
	n       int
	cur     *cursor
	from    *lockedRow
}

// planWalk says where the next walk of queueName starts. c.mu is held.
//
// A walk from the head reads past two kinds of rows before it finds free
// ones: with many claimers, the jobs the others hold (work that grows with
// claimers times their batches); and, until vacuum, the claim index's
// entries for every job completed since — all of them while a long
// transaction anywhere on the server holds the MVCC horizon. So after a
// walk that locked jobs, the next one starts at the first row it locked
// (jobs before it were taken or held then), or at the last row any
// claimer of the Driver locked when that is further on (fronts). A walk
// starts at the head instead, where jobs released behind the start come
// back, on every resumeEvery-th claim of the Driver's claimers of the
// queue, after a claimer released jobs, and at once
// when a resumed walk finds nothing (so a job released behind the resume
// point comes back at once); a head walk that took long puts the next
// periodic one off (headGap). A walk that finds fewer than n keeps
// the resume point: a queue its workers keep nearly empty would otherwise
// walk every dead entry on nearly every claim.
// Lower priority numbers are read from their start in every walk.
func (c *AdvisoryClaimer) planWalk(queueName string, n int) *walkPlan {
	heldIDs := make([]int64, 0, len(c.held))
	for id := range c.held {
		heldIDs = append(heldIDs, id)
	}
	cur := c.cursors[queueName]
	if cur == nil {
		if len(c.cursors) >= maxCursors || c.cursors == nil {
			c.cursors = map[string]*cursor{}
		}
		cur = &cursor{}
		c.cursors[queueName] = cur
	}
	cur.claims++
	headDue := !time.Now().Before(cur.notHeadBefore)
	if c.d.fronts.count(queueName)%resumeEvery == 0 && headDue {
		cur.resume = nil
	}
	w := &walkPlan{queue: queueName, heldIDs: heldIDs, n: n, cur: cur}
	if cur.resume != nil {
		w.from = c.d.fronts.past(queueName, cur.resume)
	}
	return w
}

// walked records what walk w locked, which took took (timed: the only
// walk of its round trip, on a connection that had its statements
// prepared), and reports whether to walk again: a resumed walk that found
// nothing is followed by one from the head, which w then is. c.mu is
// held.
func (c *AdvisoryClaimer) walked(w *walkPlan, locked []lockedRow, took time.Duration, timed bool) (again bool) {
	cur := w.cur
	switch {
	case !timed:
	case w.from == nil:
		cur.notHeadBefore = time.Now().Add(headGap(took, cur.resumed))
	default:
		cur.resumed = took
	}
	if len(locked) > 0 {
		c.skipped.Add(int64(locked[len(locked)-1].Skipped))
		first := locked[0]
		for _, l := range locked[1:] {
			if before(&l, &first) {
				first = l
			}
		}
		cur.resume = &first
		c.d.fronts.advance(w.queue, locked)
		return false
	}
	cur.resume = nil
	if w.from == nil {
		return false
	}
	c.d.fronts.reset(w.queue, w.from)
	w.from = nil // nothing past the resume point: walk from the head
	return true
}

// walkSteps are the steps of walk w, which read the rows it locked into
// locked. c.mu is held.
func (c *AdvisoryClaimer) walkSteps(w *walkPlan, locked *[]lockedRow) []step {
	priority, runAt, id := headPriority, headRunAt, int64(0)
	if w.from != nil {
		priority, runAt, id = w.from.Priority, pgtype.Timestamptz{Time: w.from.RunAt, Valid: true}, w.from.ID
	}
	return c.d.planned(c.d.stmts.claimAdvisory, []any{w.queue, w.heldIDs, int32(w.n), priority, runAt, id, c.mark},
		func(rows pgx.Rows) (err error) {
			*locked, err = readLocked(rows)
			return err
		})
}

// readChecked reads the rows postcheck.sql returned.
func readChecked(rows pgx.Rows) ([]*queue.Job, error) {
	r := new(jobRow)
	j := &r.j
	return readJobs(rows, r, []any{&j.ID, &j.Queue, &j.Payload, &j.Priority, &j.RunAt, &r.attempt, &r.maxAtt,
		&r.lastError, &r.dedupe, &j.CreatedAt, &j.Kind})
}

// readLocked reads the rows claim_advisory.sql locked.
func readLocked(rows pgx.Rows) ([]lockedRow, error) {
	defer rows.Close()
	var (
		out  []lockedRow
		l    lockedRow
		dest = []any{&l.ID, &l.NS, &l.Priority, &l.RunAt, &l.Skipped}
	)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
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
		c.settle()
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
		c.settle()
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

// LockCheckInterval is a third of Config.LockCheck: how often a Worker
// calls Extend while it holds jobs of this claimer (queue.LockCheck).
func (c *AdvisoryClaimer) LockCheckInterval() time.Duration { return c.d.cfg.LockCheck / 3 }

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

// backendPID returns the server process of the claimer's connection, 0
// when it has none. For tests.
func (c *AdvisoryClaimer) backendPID() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return 0
	}
	return c.conn.Conn().PgConn().PID()
}

// heldIDs returns the jobs the claimer holds. For tests.
func (c *AdvisoryClaimer) heldIDs() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]int64, 0, len(c.held))
	for id := range c.held {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// advisoryLocksHold refuses, with queue.ErrUnsupportedServer, a server
// that speaks PostgreSQL's protocol but whose advisory lock functions take
// no lock: CockroachDB accepts pg_try_advisory_lock and returns true
// without locking, so every claimer would take every job. It is told by
// the crdb_version parameter CockroachDB reports at connection start
// (param reads the connection's parameters). Not tested against a
// CockroachDB server here.
func advisoryLocksHold(param func(string) string) error {
	if v := param("crdb_version"); v != "" {
		return fmt.Errorf("%w: postgres: %s takes no advisory locks; use the SKIP LOCKED strategy "+
			"(postgres.Config{Strategy: postgres.SkipLocked}, or dbq --strategy skiplocked)", queue.ErrUnsupportedServer, v)
	}
	return nil
}

// sessionProbeWait bounds the wait for a second pool connection in
// ownSession.
const sessionProbeWait = 2 * time.Second

// ownSession refuses, with queue.ErrUnsupportedServer and the setup to use
// instead, a pool whose connections do not each have a session of their
// own: a transaction pooler (PgBouncer with pool_mode = transaction) hands
// one client connection's statements to any server connection, and the
// advisory locks taken through it land in sessions other clients then use
// (1,243 jobs of 3,000 ran twice that way). pid is the server process the
// claimer's connection reached; a second connection of the pool that
// reaches the same one shares sessions. Such a pooler reuses the server
// connection a client just left, so the probe finds it; where it does not
// (a pool with no connection to spare, other pooler settings), the session
// guard in every statement of the claimer still stops the first one that
// runs elsewhere, before it takes, checks or releases a lock. Passed once
// per Driver.
func (d *Driver) ownSession(ctx context.Context, pid int32) error {
	if d.sessionChecked.Load() {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, sessionProbeWait)
	defer cancel()
	conn, err := d.pool.Acquire(actx)
	if err != nil {
		if ctx.Err() != nil {
			return ctxErr("new claimer", ctx)
		}
		return nil // no connection to spare: the session guard stands alone
	}
	defer conn.Release()
	var other int32
	if err := conn.QueryRow(actx, d.stmts.backendPID).Scan(&other); err != nil {
		if ctx.Err() == nil && actx.Err() != nil {
			return nil // too slow an answer to probe with: the session guard stands alone
		}
		return interpret("check the session", err)
	}
	if other == pid {
		return fmt.Errorf("%w: postgres: two connections of the pool reached the same server process %d; %s",
			queue.ErrUnsupportedServer, pid, adviceAdvisory)
	}
	d.sessionChecked.Store(true)
	return nil
}

// fronts is, per queue, the last row (in claim order) that any advisory
// claimer of the Driver locked, its front, and the count of the claimers'
// walks. A claimer's resumed walk starts at the front when that is past its
// own resume point. With many claimers in a process, each one's own resume
// point falls behind the jobs the others took since its last claim, and
// every resumed walk read past them all (rows other sessions hold: one
// failed lock each): at 64 claimers a walk averaged 4.5 ms against 2.3 ms
// at 8, and 27% of the rows it locked were gone by the post-check. Rows
// behind the front come back as rows behind any resume point do, in the
// walks from the head; those are every resumeEvery-th walk of the
// process's claimers of the queue, not of each claimer: a walk from the
// head reads past every job the claimers hold, so with 64 claimers each
// walking from the head every resumeEvery-th claim, most of the time went
// there.
type fronts struct {
	mu sync.Mutex
	m  map[string]*front
}

type front struct {
	row    *lockedRow // nil: none
	claims int
}

// before reports whether a comes before b in claim order.
func before(a, b *lockedRow) bool {
	return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.RunAt.Compare(b.RunAt), cmp.Compare(a.ID, b.ID)) < 0
}

// get returns queue's front, making it. f.mu is held.
func (f *fronts) get(queueName string) *front {
	fr := f.m[queueName]
	if fr == nil {
		if f.m == nil || len(f.m) >= maxCursors {
			f.m = map[string]*front{}
		}
		fr = &front{}
		f.m[queueName] = fr
	}
	return fr
}

// count counts a walk of queue and returns the count so far.
func (f *fronts) count(queueName string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	fr := f.get(queueName)
	fr.claims++
	return fr.claims
}

// past returns queue's front when it is past from, else from.
func (f *fronts) past(queueName string, from *lockedRow) *lockedRow {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fr := f.get(queueName); fr.row != nil && before(from, fr.row) {
		return fr.row
	}
	return from
}

// advance moves queue's front to the last of locked when that is past it.
func (f *fronts) advance(queueName string, locked []lockedRow) {
	last := &locked[0]
	for i := range locked[1:] {
		if before(last, &locked[i+1]) {
			last = &locked[i+1]
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fr := f.get(queueName); fr.row == nil || before(fr.row, last) {
		l := *last
		fr.row = &l
	}
}

// reset forgets queue's front when a walk from it, at, found nothing past
// it (and it has not moved since): the next resumed walks start at their
// own points again.
func (f *fronts) reset(queueName string, at *lockedRow) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fr := f.get(queueName); fr.row == at {
		fr.row = nil
	}
}

// clear forgets every front (jobs were given back behind them).
func (f *fronts) clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fr := range f.m {
		fr.row = nil
	}
}
