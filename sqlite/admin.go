package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/dbqueue/dbq/queue"
)

var _ queue.Admin = (*Driver)(nil)

// retryDeadBatch is the most dead jobs one RetryDead statement revives; it
// matches the LIMIT in retry_dead.sql.
const retryDeadBatch = 1000

// EnqueueUnique implements queue.Admin: INSERT … ON CONFLICT DO NOTHING,
// then the existing job's id when nothing was inserted. Both run under the
// write lock (the driver's transaction, or the caller's, whose INSERT takes
// it), so the existing job cannot vanish in between. tx is nil or a *sql.Tx
// as for Enqueue; the conflict never aborts it.
func (d *Driver) EnqueueUnique(ctx context.Context, tx any, job queue.NewJob) (int64, bool, error) {
	if d.closed.Load() {
		return 0, false, queue.ErrClosed
	}
	var id int64
	var existed bool
	run := func(ctx context.Context, r runner) error {
		var err error
		id, existed, err = d.insertUnique(ctx, r, job)
		return err
	}
	switch t := tx.(type) {
	case nil:
		if err := d.write(ctx, true, run); err != nil {
			return 0, false, err
		}
	case *sql.Tx:
		if t == nil {
			return 0, false, fmt.Errorf("%w: nil *sql.Tx", queue.ErrUnsupportedTx)
		}
		if err := run(ctx, runner{d: d, tx: t}); err != nil {
			return 0, false, err
		}
	default:
		return 0, false, fmt.Errorf("%w: sqlite takes a *sql.Tx, not %T", queue.ErrUnsupportedTx, tx)
	}
	return id, existed, nil
}

func (d *Driver) insertUnique(ctx context.Context, r runner, j queue.NewJob) (int64, bool, error) {
	var runAt any
	if !j.RunAt.IsZero() {
		runAt = j.RunAt.UnixMicro()
	}
	payload := j.Payload
	if payload == nil {
		payload = []byte{}
	}
	ids, err := queryIDs(ctx, r, d.stmts.enqueueUnique,
		j.Queue, j.Kind, payload, int64(j.Priority), runAt, j.Delay.Microseconds(), int64(j.MaxAttempts), j.DedupeKey)
	if err != nil {
		return 0, false, err
	}
	if len(ids) == 1 {
		return ids[0], false, nil
	}
	ids, err = queryIDs(ctx, r, d.stmts.findUnique, j.Queue, j.DedupeKey)
	if err != nil {
		return 0, false, err
	}
	if len(ids) != 1 {
		// Only a non-unique constraint other than the dedupe key could get
		// here; the schema has none.
		return 0, false, errors.New("dbq: sqlite: unique insert skipped but no job holds the key")
	}
	return ids[0], true, nil
}

// queryIDs runs st and returns the int64 first column of its rows.
func queryIDs(ctx context.Context, r runner, st *stmt, args ...any) ([]int64, error) {
	rows, err := r.query(ctx, st, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, interpret(err)
		}
		ids = append(ids, id)
	}
	return ids, interpret(rows.Err())
}

// Jobs implements queue.Admin. It reads without the write lock (WAL
// readers do not block writers).
func (d *Driver) Jobs(ctx context.Context, f queue.JobFilter) ([]*queue.Job, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	if f.State == queue.StateDead && f.Queue != "" {
		return readAll(ctx, d, d.stmts.jobsDead, scanJob, f.Queue, f.AfterID, f.Limit, f.Kind)
	}
	return readAll(ctx, d, d.stmts.jobs, scanJob, f.Queue, string(f.State), f.AfterID, f.Limit, f.Kind)
}

// scanJob reads a row of jobs.sql or jobs_dead.sql.
func scanJob(rows *sql.Rows) (*queue.Job, error) {
	var (
		j                        queue.Job
		priority, runAt, created int64
		attempt, maxAttempts     int64
		state                    string
		token, until             sql.NullInt64
		lastErr, dedupe          sql.NullString
	)
	if err := rows.Scan(&j.ID, &j.Queue, &j.Kind, &j.Payload, &priority, &runAt, &attempt, &maxAttempts, &state,
		&token, &until, &lastErr, &dedupe, &created); err != nil {
		return nil, err
	}
	if j.Payload == nil {
		j.Payload = []byte{}
	}
	j.Priority = int16(priority)
	j.RunAt = fromMicros(runAt)
	j.Attempt, j.MaxAttempts = int(attempt), int(maxAttempts)
	j.State = queue.State(state)
	j.Token = token.Int64
	if until.Valid {
		j.ClaimedUntil = fromMicros(until.Int64)
	}
	j.LastError, j.DedupeKey = lastErr.String, dedupe.String
	j.CreatedAt = fromMicros(created)
	return &j, nil
}

// Cancel implements queue.Admin. SQLite has one writer at a time, so no
// claim can take a job between the state check and the delete.
func (d *Driver) Cancel(ctx context.Context, ids []int64) ([]int64, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	return d.batch(ctx, d.stmts.cancel, idsJSON(ids))
}

// RetryDead implements queue.Admin, in statements of at most
// retryDeadBatch jobs, each its own write, so a large revival never holds
// the write lock for long.
func (d *Driver) RetryDead(ctx context.Context, name string, ids []int64) ([]int64, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	var which any // NULL: every dead job of the queue
	if ids != nil {
		which = idsJSON(ids)
	}
	var out []int64
	for {
		got, err := d.batch(ctx, d.stmts.retryDead, name, which)
		if err != nil {
			return out, err
		}
		out = append(out, got...)
		if len(got) < retryDeadBatch {
			return out, nil
		}
	}
}

// SetPaused implements queue.Admin.
func (d *Driver) SetPaused(ctx context.Context, name string, paused bool) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	return d.write(ctx, false, func(ctx context.Context, r runner) error {
		_, err := r.exec(ctx, d.stmts.setPaused, name, paused)
		return err
	})
}

// Paused implements queue.Admin.
func (d *Driver) Paused(ctx context.Context) ([]string, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	return readAll(ctx, d, d.stmts.paused, func(rows *sql.Rows) (string, error) {
		var q string
		err := rows.Scan(&q)
		return q, err
	})
}

// idsJSON encodes ids as a JSON array for json_each.
func idsJSON(ids []int64) string {
	b := make([]byte, 0, 2+len(ids)*12)
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(append(b, ']'))
}

// StatsByKind implements queue.Admin (stats_by_kind.sql): the states of
// Stats, per queue and kind.
func (d *Driver) StatsByKind(ctx context.Context) ([]queue.KindStats, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	return readAll(ctx, d, d.stmts.statsByKind, func(rows *sql.Rows) (queue.KindStats, error) {
		var s queue.KindStats
		err := rows.Scan(&s.Queue, &s.Kind, &s.Ready, &s.Scheduled, &s.Held, &s.Dead)
		return s, err
	})
}

// readAll runs st on the pool, outside any transaction (WAL readers do not
// block writers), retrying BUSY, and returns scan of each row.
func readAll[T any](ctx context.Context, d *Driver, st *stmt, scan func(*sql.Rows) (T, error), args ...any) ([]T, error) {
	var out []T
	err := retry(ctx, func() error {
		out = out[:0]
		rows, err := runner{d: d}.query(ctx, st, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			v, err := scan(rows)
			if err != nil {
				return interpret(err)
			}
			out = append(out, v)
		}
		return interpret(rows.Err())
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

var _ queue.QueueCounter = (*Driver)(nil)

// CountQueues counts as Stats does, each count stopping at limit
// (count_queues.sql).
func (d *Driver) CountQueues(ctx context.Context, limit int64) ([]queue.QueueStats, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	return readAll(ctx, d, d.stmts.countQueues, scanQueueStats, limit)
}

var _ queue.DedupeFinder = (*Driver)(nil)

// FindDedupe returns the id of queue name's job with dedupe key key
// (find_unique.sql, a probe of the unique index jobs_dedupe).
func (d *Driver) FindDedupe(ctx context.Context, name, key string) (int64, bool, error) {
	if d.closed.Load() {
		return 0, false, queue.ErrClosed
	}
	ids, err := readAll(ctx, d, d.stmts.findUnique, func(rows *sql.Rows) (id int64, err error) {
		err = rows.Scan(&id)
		return id, err
	}, name, key)
	if err != nil || len(ids) == 0 {
		return 0, false, err
	}
	return ids[0], true, nil
}
