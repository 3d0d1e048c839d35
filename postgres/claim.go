package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// NewClaimer returns an *AdvisoryClaimer, which takes one connection from
// the pool and keeps it until Close, or a *SkipLockedClaimer, which borrows
// a connection per call.
func (d *Driver) NewClaimer(ctx context.Context) (queue.Claimer, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, ctxErr("new claimer", ctx)
	}
	if d.cfg.Strategy == SkipLocked {
		if err := d.preparedSurvive(ctx); err != nil {
			return nil, err
		}
		return newSkipLockedClaimer(d), nil
	}
	c, err := d.openAdvisoryClaimer(ctx)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return c, nil
}

// resumeEvery: a claimer (either strategy) that starts its claims where
// the last one began still starts every resumeEvery-th claim at the head,
// where jobs released behind that point (or enqueued with an old run_at)
// come back.
const resumeEvery = 16

// The start of a walk at the head of the queue.
var (
	headPriority = int16(math.MinInt16)
	headRunAt    = pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
)

const (
	// cancelRequestTimeout bounds the delivery of a cancel request.
	cancelRequestTimeout = 5 * time.Second
	// cancelGrace is how long a statement may run on after its cancel
	// request; then its connection is closed.
	cancelGrace = 10 * time.Second
	// cleanupTimeout bounds the statements that must run after a failure or
	// a cut-off context (unlocks, sweeps), on a context of their own.
	cleanupTimeout = 10 * time.Second
)

// guard returns the context to run one statement on conn with, and a done
// func to call once its results are read.
//
// pgx's default answer to a cancelled context is to close the connection.
// For an advisory claimer that would drop every lock it holds (jobs still
// being worked would run twice), and for any claim it would leave the
// outcome unknown: the statement may have committed after the client gave
// up. So the statement runs on a context ctx cannot cancel, and when ctx
// ends a cancel request asks the server to stop it instead: it is rolled
// back, or it had already finished and its result is read; either way the
// connection and its session stay, and the caller knows what happened. A
// statement that ignores the request for cancelGrace loses the connection
// after all.
//
// done returns only once any cancel request has been answered by the
// server, so that it cannot stop a later statement.
func guard(ctx context.Context, conn *pgconn.PgConn) (context.Context, func()) {
	inner, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if ctx.Done() == nil {
		return inner, cancel
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(fired)
		rctx, rcancel := context.WithTimeout(context.Background(), cancelRequestTimeout)
		_ = conn.CancelRequest(rctx)
		rcancel()
		t := time.NewTimer(cancelGrace)
		defer t.Stop()
		select {
		case <-inner.Done():
		case <-t.C:
			cancel()
		}
	})
	return inner, func() {
		if !stop() {
			cancel()
			<-fired
		}
		cancel()
	}
}

// querier runs a query: a *pgx.Conn, a pgx.Tx or a pool.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// queryIDs runs a statement that returns one bigint column.
func queryIDs(ctx context.Context, q querier, sql string, args ...any) ([]int64, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return readIDs(rows)
}

// readIDs reads rows of one bigint column. It scans every row into one
// variable through one argument slice (pgx.RowTo allocates both per row).
func readIDs(rows pgx.Rows) ([]int64, error) {
	defer rows.Close()
	var (
		out  []int64
		id   int64
		dest = []any{&id}
	)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// jobRow is where a claimed job's row is scanned: the job and the columns
// that need converting. Scanning every row of a claim into one jobRow and
// copying out the job costs one allocation per job for the scan instead
// of one per column.
type jobRow struct {
	j                 queue.Job
	lastError, dedupe pgtype.Text
	attempt, maxAtt   int32
}

// job returns a new Job with the row's values.
func (r *jobRow) job() *queue.Job {
	j := new(queue.Job)
	*j = r.j
	j.Attempt, j.MaxAttempts = int(r.attempt), int(r.maxAtt)
	j.LastError, j.DedupeKey = r.lastError.String, r.dedupe.String
	return j
}

// readJobs reads the rows of a claim: scan puts each into one jobRow,
// whose job is then taken.
func readJobs(rows pgx.Rows, r *jobRow, dest []any) ([]*queue.Job, error) {
	defer rows.Close()
	var out []*queue.Job
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		out = append(out, r.job())
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// planned are the steps that run sql after plan.sql, in one implicit
// transaction: the planner settings that keep dbq's hot statements on
// their indexes and their plans cached (plan.sql says why).
func (d *Driver) planned(sql string, args []any, read func(pgx.Rows) error) []step {
	return []step{{sql: d.stmts.plan, chained: true}, {sql: sql, args: args, read: read}}
}

// plannedIDs runs a statement returning ids on conn under guard, after
// plan.sql in one round trip when prepared (the connection prepares
// statements), and alone otherwise.
func (d *Driver) plannedIDs(ctx context.Context, conn *pgx.Conn, prepared bool, sql string, args ...any) ([]int64, error) {
	if !prepared {
		return guardedIDs(ctx, conn, sql, args...)
	}
	gctx, done := guard(ctx, conn.PgConn())
	defer done()
	var ids []int64
	errs := pipelined(gctx, conn, d.planned(sql, args, func(rows pgx.Rows) (err error) {
		ids, err = readIDs(rows)
		return err
	}))
	if err := cmp.Or(errs...); err != nil {
		return nil, err
	}
	return ids, nil
}

// guardedIDs runs queryIDs on conn under guard.
func guardedIDs(ctx context.Context, conn *pgx.Conn, sql string, args ...any) ([]int64, error) {
	gctx, done := guard(ctx, conn.PgConn())
	defer done()
	return queryIDs(gctx, conn, sql, args...)
}

// errorText makes s storable as last_error: valid UTF-8 without NUL bytes
// (a PostgreSQL text value can hold neither), at most queue.MaxErrorBytes
// bytes, cut on a character boundary.
func errorText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if len(s) <= queue.MaxErrorBytes {
		return s
	}
	cut := queue.MaxErrorBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// preparedSurvive refuses, with queue.ErrUnsupportedServer and the setup to
// use instead, a pool whose named prepared statements (pgx's default
// cache_statement mode) do not survive between transactions: behind a
// transaction pooler that passes them through (PgBouncer before 1.21, or
// without max_prepared_statements), a claim would run, then its completion
// fail with 42P05 or 26000, and the jobs run again. It runs one prepared
// statement on two connections held at once: such a pooler hands the second
// the server connection the first just left, where the statement's name is
// already taken. Another client of the pooler taking that server
// connection in between can hide the pooler from the probe; a pool in
// another exec mode, or that a probe could not check (no connection to
// spare), is let through too. The statements' own errors then say the
// same. Passed once per Driver.
func (d *Driver) preparedSurvive(ctx context.Context) error {
	if d.preparedChecked.Load() || d.pool.Config().ConnConfig.DefaultQueryExecMode != pgx.QueryExecModeCacheStatement {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, sessionProbeWait)
	defer cancel()
	for range 2 {
		conn, err := d.pool.Acquire(actx)
		if err != nil {
			if ctx.Err() != nil {
				return ctxErr("new claimer", ctx)
			}
			return nil // no connection to spare
		}
		defer conn.Release()
		var pid int32
		if err := conn.QueryRow(actx, d.stmts.backendPID).Scan(&pid); err != nil {
			if ctx.Err() == nil && actx.Err() != nil {
				return nil // too slow an answer to probe with
			}
			return interpret("check prepared statements", err)
		}
	}
	d.preparedChecked.Store(true)
	return nil
}

// step is one statement of a pipeline: its text, its arguments, and read,
// which reads its rows (nil: they are discarded).
type step struct {
	sql  string
	args []any
	read func(pgx.Rows) error
	// chained: the step shares the next step's implicit transaction (no
	// Sync between them), so transaction-local settings it makes
	// (set_config(…, true)) hold for that step and end with it, and a
	// server error in either fails both.
	chained bool
}

// pipelined runs steps on conn in one round trip, each in an implicit
// transaction of its own (a Sync follows each) unless chained to the next,
// so a step that fails undoes none before its transaction and stops none
// after it. It returns each step's error: nil once the step's transaction
// is known to have committed; every step of a transaction that failed gets
// the error, and a step whose outcome could not be read the error that cut
// the pipeline short. Run under guard, so that a cancelled ctx stops the
// statement running rather than the connection.
//
// The statements run prepared, as pgx's default exec mode runs them; a
// statement is prepared on conn the first time it is used there. One that
// cannot be prepared fails with the steps after it; those before it run.
func pipelined(ctx context.Context, conn *pgx.Conn, steps []step) []error {
	errs := make([]error, len(steps))
	fill := func(from int, err error) []error {
		for i := from; i < len(steps); i++ {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return errs
	}
	sds := make([]*pgconn.StatementDescription, len(steps))
	for i, s := range steps {
		sd, err := conn.Prepare(ctx, s.sql, s.sql)
		if err != nil {
			fill(i, err)
			if conn.IsClosed() {
				return fill(0, err)
			}
			steps = steps[:i]
			break
		}
		sds[i] = sd
	}
	if len(steps) == 0 {
		return errs
	}
	m := conn.TypeMap()
	p := conn.PgConn().StartPipeline(ctx)
	for i, s := range steps {
		var eqb pgx.ExtendedQueryBuilder
		if err := eqb.Build(m, sds[i], s.args); err != nil {
			_ = p.Close()
			return fill(0, err)
		}
		// Described by the server at each run (SendQueryPrepared), not from
		// pgconn's queue of descriptions: that queue keeps the description
		// of a step the server skipped after an error in its transaction,
		// and would read every later step's rows with the one before.
		p.SendQueryPrepared(sds[i].Name, eqb.ParamValues, eqb.ParamFormats, eqb.ResultFormats)
		if !s.chained || i == len(steps)-1 {
			p.SendPipelineSync()
		}
	}
	if err := p.Flush(); err != nil {
		_ = p.Close()
		return fill(0, err)
	}
	first := 0 // the first step of the transaction being read
	for i := 0; i < len(steps); i++ {
		s := steps[i]
		res, err := p.GetResults()
		if err == nil {
			rr, ok := res.(*pgconn.ResultReader)
			if !ok {
				err = fmt.Errorf("dbq: postgres: pipeline: got %T for a statement", res)
			} else {
				rows := pgx.RowsFromResultReader(m, rr)
				if s.read != nil {
					err = s.read(rows)
				}
				rows.Close()
				err = cmp.Or(err, rows.Err())
			}
		}
		var pgErr *pgconn.PgError
		if s.chained && i < len(steps)-1 && errors.As(err, &pgErr) {
			// The server skips the rest of the transaction up to its Sync,
			// and pgconn with it: every step of it failed.
			for ; i < len(steps)-1 && steps[i].chained; i++ {
				errs[i] = err
			}
			s = steps[i]
		}
		errs[i] = cmp.Or(errs[i], err)
		if s.chained && i < len(steps)-1 {
			continue // no Sync yet: the next step is in this transaction
		}
		// The Sync: the transaction ends here. An error reported in its
		// place (a failed commit) leaves the Sync still to be read.
		if _, serr := p.GetResults(); serr != nil {
			if !errors.As(serr, &pgErr) {
				_ = p.Close()
				return fill(first, serr)
			}
			errs[i] = cmp.Or(errs[i], serr)
			if _, serr := p.GetResults(); serr != nil {
				_ = p.Close()
				return fill(i+1, serr)
			}
		}
		// A transaction that failed failed for every step in it.
		if errs[i] != nil && errors.As(errs[i], &pgErr) {
			for j := first; j < i; j++ {
				errs[j] = cmp.Or(errs[j], errs[i])
			}
		}
		first = i + 1
	}
	_ = p.Close() // every step's outcome is known by now
	return errs
}

// cachesStatements reports whether the pool runs statements in pgx's
// default exec mode (cache_statement), where statements are prepared on
// their connection: then pipelines (pipelined) may prepare theirs too. In
// any other mode (a transaction pooler without prepared statements) each
// statement is sent alone.
func (d *Driver) cachesStatements() bool {
	return d.pool.Config().ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement
}
