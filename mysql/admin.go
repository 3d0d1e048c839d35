package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

var _ queue.Admin = (*Driver)(nil)

// retryDeadBatch is the most dead jobs one RetryDead transaction revives.
const retryDeadBatch = 1000

// EnqueueUnique stores job unless its queue holds a job with its dedupe
// key, and returns the id of one or the other and whether it existed. tx
// is nil (an autocommit statement on the pool) or the caller's *sql.Tx, as
// for Enqueue. It is one INSERT … ON DUPLICATE KEY UPDATE that changes no
// column of an existing job (enqueue_unique.sql): a collision raises no
// error, so the caller's transaction goes on, and the existing job's id
// comes from the same statement. Like any insert that meets a unique key,
// it locks the existing job's row until the statement's transaction ends:
// in a caller's transaction, a worker completing that job waits for it.
// The session's LAST_INSERT_ID() means nothing afterwards.
func (d *Driver) EnqueueUnique(ctx context.Context, tx any, job queue.NewJob) (int64, bool, error) {
	if d.closed.Load() {
		return 0, false, queue.ErrClosed
	}
	if !job.RunAt.IsZero() {
		if y := job.RunAt.UTC().Year(); y < 1000 || y > 9999 {
			return 0, false, fmt.Errorf("%w: RunAt %v outside DATETIME's years 1000..9999", queue.ErrInvalidJob, job.RunAt)
		}
	}
	if job.DedupeKey == "" {
		return 0, false, fmt.Errorf("%w: EnqueueUnique needs a DedupeKey", queue.ErrInvalidJob)
	}
	var runAt any
	if !job.RunAt.IsZero() {
		runAt = formatTime(job.RunAt)
	}
	payload := job.Payload
	if payload == nil {
		payload = []byte{}
	}
	args := []any{job.Queue, []byte(job.Kind), payload, job.Priority, runAt, micros(job.Delay), job.MaxAttempts, []byte(job.DedupeKey)}
	var (
		id      int64
		existed bool
	)
	run := func(ex execQuerier) error {
		res, err := ex.ExecContext(ctx, d.stmts.get(sqlEnqueueUnique, 0), args...)
		if err != nil {
			return d.classify("enqueue unique", err)
		}
		got, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("dbq: mysql enqueue unique: %w", err)
		}
		switch {
		case got > 0:
			id, existed = got, false
		case got < 0:
			id, existed = -got, true
		default:
			return fmt.Errorf("dbq: mysql enqueue unique: the server reported no id for key %q", job.DedupeKey)
		}
		return nil
	}
	switch t := tx.(type) {
	case nil:
		if err := d.retry(ctx, func() error { return run(d.db) }); err != nil {
			return 0, false, err
		}
	case *sql.Tx:
		if t == nil {
			return 0, false, fmt.Errorf("%w: nil *sql.Tx", queue.ErrUnsupportedTx)
		}
		// No retry here: a deadlock has rolled back the caller's whole
		// transaction, which only the caller can run again.
		if err := run(t); err != nil {
			return 0, false, err
		}
	default:
		return 0, false, fmt.Errorf("%w: %T (the mysql dialect takes a *sql.Tx)", queue.ErrUnsupportedTx, tx)
	}
	return id, existed, nil
}

// Jobs lists the stored jobs that match f in id order, at most f.Limit
// (0: queue.DefaultListLimit). Each filter adds fixed text to jobs.sql and
// its value as a bind parameter; a bad queue name, state or limit is
// refused before anything runs.
func (d *Driver) Jobs(ctx context.Context, f queue.JobFilter) ([]*queue.Job, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	if f.Queue != "" {
		if err := dialect.ValidateQueue(f.Queue); err != nil {
			return nil, err
		}
	}
	switch f.State {
	case "", queue.StateReady, queue.StateClaimed, queue.StateDead:
	default:
		return nil, fmt.Errorf("%w: unknown state %q", queue.ErrInvalidJob, f.State)
	}
	switch {
	case f.Limit < 0 || f.Limit > queue.MaxListLimit:
		return nil, fmt.Errorf("%w: Limit %d out of range 0..%d", queue.ErrInvalidLimit, f.Limit, queue.MaxListLimit)
	case f.Limit == 0:
		f.Limit = queue.DefaultListLimit
	}
	args := []any{f.AfterID}
	if f.Queue != "" {
		args = append(args, f.Queue)
	}
	if f.State != "" {
		args = append(args, string(f.State))
	}
	if f.Kind != "" {
		args = append(args, []byte(f.Kind))
	}
	args = append(args, f.Limit)
	query := d.stmts.jobs(f.Queue != "", f.State != "", f.Kind != "", f.State == queue.StateDead)
	var out []*queue.Job
	err := d.retry(ctx, func() error {
		out = out[:0]
		rows, err := d.db.QueryContext(ctx, query, args...)
		if err != nil {
			return d.classify("jobs", err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				j                       queue.Job
				state                   string
				token                   sql.NullInt64
				runAt, until, createdAt utcTime
				lastErr                 sql.NullString
				kind, dedupe            []byte
			)
			if err := rows.Scan(&j.ID, &j.Queue, &kind, &j.Payload, &j.Priority, &runAt, &j.Attempt, &j.MaxAttempts,
				&state, &token, &until, &lastErr, &dedupe, &createdAt); err != nil {
				return d.classify("jobs", err)
			}
			if j.Payload == nil {
				j.Payload = []byte{}
			}
			j.State = queue.State(state)
			j.Token = token.Int64
			j.RunAt, j.ClaimedUntil, j.CreatedAt = runAt.T, until.T, createdAt.T
			j.Kind, j.LastError, j.DedupeKey = string(kind), lastErr.String, string(dedupe)
			out = append(out, &j)
		}
		return d.classify("jobs", rows.Err())
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Cancel deletes those of ids that no one holds — ready, scheduled or dead
// — and returns them in ascending order. Per chunk of ids, in a READ
// COMMITTED transaction: lock the unheld rows by primary key
// (cancel_lock.sql), delete them by primary key (cancel.sql). A job a
// claim is taking meanwhile is waited for and then left to its holder.
func (d *Driver) Cancel(ctx context.Context, ids []int64) ([]int64, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	ids = uniqueIDs(ids)
	var out []int64
	for chunk := range slices.Chunk(ids, maxList) {
		var done []int64
		err := d.retry(ctx, func() error {
			var err error
			done, err = d.lockAndRun(ctx, "cancel", d.stmts.get(sqlCancelLock, len(chunk)), anys(chunk), sqlCancel)
			return err
		})
		if err != nil {
			return sortIDs(out), err
		}
		out = append(out, done...)
	}
	return sortIDs(out), nil
}

// RetryDead makes dead jobs of queue q ready now with attempt 0, keeping
// last_error, and returns their ids in ascending order. ids nil means
// every dead job of q, found through the claim index in batches of
// retryDeadBatch, each its own transaction; otherwise those of ids that
// are dead jobs of q. Either way the rows are locked and updated by
// primary key only.
func (d *Driver) RetryDead(ctx context.Context, q string, ids []int64) ([]int64, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	if err := dialect.ValidateQueue(q); err != nil {
		return nil, err
	}
	revive := func(chunk []int64) ([]int64, error) {
		var done []int64
		err := d.retry(ctx, func() error {
			var err error
			args := append(anys(chunk), q)
			done, err = d.lockAndRun(ctx, "retry dead", d.stmts.get(sqlRetryDeadLock, len(chunk)), args, sqlRetryDead)
			return err
		})
		return done, err
	}
	var out []int64
	if ids != nil {
		for chunk := range slices.Chunk(uniqueIDs(ids), retryDeadBatch) {
			done, err := revive(chunk)
			out = append(out, done...)
			if err != nil {
				return sortIDs(out), err
			}
		}
		return sortIDs(out), nil
	}
	for {
		cand, err := dialect.QueryIDs(ctx, d.db, d.stmts.get(sqlRetryDeadCandidates, 0), q, retryDeadBatch)
		if err != nil {
			return sortIDs(out), d.classify("retry dead", err)
		}
		if len(cand) == 0 {
			return sortIDs(out), nil
		}
		done, err := revive(cand)
		out = append(out, done...)
		if err != nil || len(cand) < retryDeadBatch {
			return sortIDs(out), err
		}
	}
}

// lockAndRun locks rows with the locking read lock (args are its
// parameters) in a READ COMMITTED transaction on the pool, runs statement
// name on the locked ids, commits, and returns those ids.
func (d *Driver) lockAndRun(ctx context.Context, what, lock string, args []any, name string) ([]int64, error) {
	tx, err := beginRC(ctx, d.db)
	if err != nil {
		return nil, d.classify(what, err)
	}
	defer tx.Rollback()
	locked, err := dialect.QueryIDs(ctx, tx, lock, args...)
	if err != nil {
		return nil, d.classify(what, err)
	}
	if len(locked) == 0 {
		return nil, nil // the rollback ends the empty transaction
	}
	if _, err := tx.ExecContext(ctx, d.stmts.get(name, len(locked)), anys(locked)...); err != nil {
		return nil, d.classify(what, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, d.classify(what+" commit", err)
	}
	return locked, nil
}

// SetPaused pauses or resumes queue q: an upsert of its row in the queues
// table. Claims read the flag on every claim, so it takes effect at once;
// jobs held when a queue is paused stay with their holders.
func (d *Driver) SetPaused(ctx context.Context, q string, paused bool) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	if err := dialect.ValidateQueue(q); err != nil {
		return err
	}
	return d.retry(ctx, func() error {
		_, err := d.db.ExecContext(ctx, d.stmts.get(sqlSetPaused, 0), q, paused, paused)
		return d.classify("set paused", err)
	})
}

// Paused lists the paused queues in name order.
func (d *Driver) Paused(ctx context.Context) ([]string, error) {
	return list(ctx, d, "paused", sqlPaused, func(rows *sql.Rows) (q string, err error) {
		return q, rows.Scan(&q)
	})
}

// Stats counts jobs per queue and says which of them are paused.
func (d *Driver) Stats(ctx context.Context) ([]queue.QueueStats, error) {
	return list(ctx, d, "stats", sqlStats, func(rows *sql.Rows) (s queue.QueueStats, err error) {
		var ageMicros int64
		err = rows.Scan(&s.Queue, &s.Ready, &s.Scheduled, &s.Held, &s.Dead, &ageMicros, &s.Paused)
		s.OldestReadyAge = float64(ageMicros) / 1e6
		return s, err
	})
}

// StatsByKind counts jobs per queue and kind (stats_by_kind.sql: one pass
// over the table, which no index on kind serves), in queue then kind
// order, bytewise; jobs without a kind count under "".
func (d *Driver) StatsByKind(ctx context.Context) ([]queue.KindStats, error) {
	return list(ctx, d, "stats by kind", sqlStatsByKind, func(rows *sql.Rows) (s queue.KindStats, err error) {
		var kind []byte
		err = rows.Scan(&s.Queue, &kind, &s.Ready, &s.Scheduled, &s.Held, &s.Dead)
		s.Kind = string(kind)
		return s, err
	})
}

// list runs statement name with args on the pool and
// reads each of its rows with scan: the admin reads that list a table.
func list[T any](ctx context.Context, d *Driver, what, name string, scan func(*sql.Rows) (T, error), args ...any) ([]T, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	rows, err := d.db.QueryContext(ctx, d.stmts.get(name, 0), args...)
	if err != nil {
		return nil, d.classify(what, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, d.classify(what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, d.classify(what, err)
	}
	return out, nil
}

// uniqueIDs returns ids sorted, without repeats (a copy: the caller's
// slice is left alone).
func uniqueIDs(ids []int64) []int64 {
	return slices.Compact(slices.Sorted(slices.Values(ids)))
}

// sortIDs sorts ids in place and returns them.
func sortIDs(ids []int64) []int64 {
	slices.Sort(ids)
	return ids
}

// The statements of CountQueues and FindDedupe.
const (
	sqlQueueNames = "queue_names"
	sqlCountQueue = "count_queue"
	sqlFindDedupe = "find_dedupe"
)

var _ queue.QueueCounter = (*Driver)(nil)

// CountQueues counts as Stats does, each count stopping at limit: the
// queues and the priorities of their ready jobs from a loose scan of the
// claim index (queue_names.sql), then per queue count_queue.sql for those
// priorities, which reads at most about limit index entries per state. A
// priority first stored between the two is not counted.
func (d *Driver) CountQueues(ctx context.Context, limit int64) ([]queue.QueueStats, error) {
	type group struct {
		queue, state string
		priority     int16
	}
	groups, err := list(ctx, d, "count queues", sqlQueueNames, func(rows *sql.Rows) (g group, err error) {
		err = rows.Scan(&g.queue, &g.state, &g.priority)
		return g, err
	})
	if err != nil {
		return nil, err
	}
	var names []string
	prios := map[string][]any{} // a queue's ready priorities, as parameters
	for _, g := range groups {
		p, seen := prios[g.queue]
		if !seen {
			names = append(names, g.queue)
		}
		if g.state == string(queue.StateReady) {
			p = append(p, g.priority)
		}
		prios[g.queue] = p
	}
	return queue.CountEachQueue(ctx, names, func(ctx context.Context, name string) (s queue.QueueStats, err error) {
		p := prios[name]
		var args []any
		if len(p) > 0 { // ready, then scheduled
			for range 2 {
				args = append(append(append(args, name), p...), limit)
			}
		}
		args = append(args, name, limit, name, limit, name, name)
		var ageMicros int64
		err = d.retry(ctx, func() error {
			return d.db.QueryRowContext(ctx, d.stmts.get(sqlCountQueue, len(p)), args...).
				Scan(&s.Ready, &s.Scheduled, &s.Held, &s.Dead, &ageMicros, &s.Paused)
		})
		s.OldestReadyAge = float64(ageMicros) / 1e6
		return s, d.classify("count queues", err)
	})
}

var _ queue.DedupeFinder = (*Driver)(nil)

// FindDedupe returns the id of queue name's job with dedupe key key
// (find_dedupe.sql, a probe of the unique index jobs_dedupe).
func (d *Driver) FindDedupe(ctx context.Context, name, key string) (int64, bool, error) {
	ids, err := list(ctx, d, "find dedupe key", sqlFindDedupe, func(rows *sql.Rows) (id int64, err error) {
		err = rows.Scan(&id)
		return id, err
	}, name, []byte(key))
	if err != nil || len(ids) == 0 {
		return 0, false, err
	}
	return ids[0], true, nil
}
