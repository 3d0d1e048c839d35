package postgres

// The advisory claimer's walk: where in a queue's ready jobs a claim
// starts looking (its head, its own resume point, or the front other
// claimers of the Driver reached), and the statement steps that lock and
// check the rows it reads. The claim itself is in claim_advisory.go, the
// session it holds its locks in in advisory_session.go.

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
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
// cheap (the claimer's cheapHeadWalk, defaultCheapHeadWalk) and four times
// the resumed walk: a server or client slowed down as a whole (load, a
// pause) slows both alike, and then the count rule alone holds.
func headGap(took, resumed, cheap time.Duration) time.Duration {
	if took < cheap || took < 4*resumed {
		return 0
	}
	return min(9*took, maxHeadGap)
}

const (
	defaultCheapHeadWalk = 2 * time.Millisecond
	maxHeadGap           = 5 * time.Second
)

// maxCursors bounds the queues a claimer keeps cursors for; past it they
// are all forgotten, which only makes the next walks start at the head.
const maxCursors = 1024

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
		cur.notHeadBefore = time.Now().Add(headGap(took, cur.resumed, c.cheapHeadWalk))
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
