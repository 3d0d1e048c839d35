package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

var _ queue.Admin = (*Driver)(nil)

// retryDeadBatch is the most jobs one retry_dead statement revives.
const retryDeadBatch = 1000

// EnqueueUnique stores job unless its queue holds a job with its dedupe
// key, and returns the id of one or the other. tx is nil, a pgx.Tx or a
// *sql.Tx, as for Enqueue. ON CONFLICT DO NOTHING never raises, so the
// caller's transaction is never aborted. The existing job may complete
// between the insert and the look-up: then the insert is tried again. A
// dedupe key PostgreSQL's text type cannot hold gives queue.ErrInvalidJob
// before anything is sent, as for Enqueue.
func (d *Driver) EnqueueUnique(ctx context.Context, tx any, job queue.NewJob) (int64, bool, error) {
	if d.closed.Load() {
		return 0, false, queue.ErrClosed
	}
	if err := checkText(job); err != nil {
		return 0, false, err
	}
	var q uniqueQuerier
	switch tx := tx.(type) {
	case nil:
		conn, err := d.pool.Acquire(ctx)
		if err != nil {
			return 0, false, interpret("enqueue unique", err)
		}
		defer conn.Release()
		q = pgxQuerier{conn.Conn()}
	case pgx.Tx:
		q = pgxQuerier{tx}
	case *sql.Tx:
		q = sqlQuerier{tx}
	default:
		return 0, false, fmt.Errorf("%w: postgres takes a pgx.Tx or *sql.Tx, not %T", queue.ErrUnsupportedTx, tx)
	}
	runAt := pgtype.Timestamptz{Time: job.RunAt, Valid: !job.RunAt.IsZero()}
	payload := job.Payload
	if payload == nil {
		payload = []byte{}
	}
	for range 100 {
		id, ok, err := q.queryID(ctx, d.stmts.enqueueUnique, job.Queue, payload, job.Priority, runAt,
			job.Delay.Microseconds(), int32(job.MaxAttempts), job.DedupeKey, job.Kind, d.channelArg())
		if err != nil {
			return 0, false, failed(ctx, "enqueue unique", err)
		}
		if ok {
			return id, false, nil
		}
		id, ok, err = q.queryID(ctx, d.stmts.dedupeExisting, job.Queue, job.DedupeKey)
		if err != nil {
			return 0, false, failed(ctx, "enqueue unique", err)
		}
		if ok {
			return id, true, nil
		}
	}
	return 0, false, fmt.Errorf("dbq: postgres: enqueue unique: the job with key %q kept vanishing", job.DedupeKey)
}

// uniqueQuerier runs a statement that returns at most one id.
type uniqueQuerier interface {
	queryID(ctx context.Context, sql string, args ...any) (int64, bool, error)
}

type pgxQuerier struct {
	q interface {
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	}
}

func (p pgxQuerier) queryID(ctx context.Context, sql string, args ...any) (int64, bool, error) {
	var id int64
	err := p.q.QueryRow(ctx, sql, args...).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return id, err == nil, err
}

type sqlQuerier struct{ tx *sql.Tx }

func (s sqlQuerier) queryID(ctx context.Context, query string, args ...any) (int64, bool, error) {
	var id int64
	err := s.tx.QueryRowContext(ctx, query, args...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return id, err == nil, err
}

// Jobs lists jobs that match f in id order (jobs.sql, rendered for each
// combination of filters, a value as a bind parameter). Jobs an advisory
// claimer holds are listed as claimed.
func (d *Driver) Jobs(ctx context.Context, f queue.JobFilter) ([]*queue.Job, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	args := []any{f.AfterID, f.Limit}
	filter := jobsFilter{Queue: f.Queue != "", Kind: f.Kind != ""}
	if filter.Queue {
		args = append(args, f.Queue)
	}
	if filter.Kind {
		if validText("Kind", f.Kind) != nil {
			return nil, nil // PostgreSQL stores no such kind
		}
		args = append(args, f.Kind)
	}
	switch f.State {
	case queue.StateDead, queue.StateReady, queue.StateClaimed:
		filter.State = f.State
	}
	rows, err := d.pool.Query(ctx, d.stmts.jobs[filter], args...)
	if err != nil {
		return nil, failed(ctx, "jobs", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*queue.Job, error) {
		var (
			j     queue.Job
			state string
			until pgtype.Timestamptz
		)
		err := r.Scan(&j.ID, &j.Queue, &j.Payload, &j.Priority, &j.RunAt, &j.Attempt, &j.MaxAttempts,
			&state, &j.Token, &until, &j.LastError, &j.DedupeKey, &j.CreatedAt, &j.Kind)
		j.State = queue.State(state)
		j.ClaimedUntil = until.Time
		return &j, err
	})
	if err != nil {
		return nil, failed(ctx, "jobs", err)
	}
	return out, nil
}

// Cancel deletes those of ids no one holds (cancel.sql) and returns them.
func (d *Driver) Cancel(ctx context.Context, ids []int64) ([]int64, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	if len(ids) == 0 {
		return nil, nil
	}
	done, err := queryIDs(ctx, d.pool, d.stmts.cancel, ids)
	if err != nil {
		return nil, failed(ctx, "cancel", err)
	}
	return sortedIDs(done), nil
}

// RetryDead revives dead jobs of queue: ids, or all of them when ids is
// nil, in statements of at most 1000 rows.
func (d *Driver) RetryDead(ctx context.Context, q string, ids []int64) ([]int64, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	var out []int64
	if ids != nil {
		for chunk := range chunks(ids, retryDeadBatch) {
			done, err := queryIDs(ctx, d.pool, d.stmts.retryDeadIDs, q, chunk)
			if err != nil {
				return sortedIDs(out), failed(ctx, "retry dead", err)
			}
			out = append(out, done...)
		}
		return sortedIDs(out), nil
	}
	for {
		done, err := queryIDs(ctx, d.pool, d.stmts.retryDeadAll, q)
		out = append(out, done...)
		if err != nil {
			return sortedIDs(out), failed(ctx, "retry dead", err)
		}
		if len(done) < retryDeadBatch {
			return sortedIDs(out), nil
		}
	}
}

// SetPaused upserts queue's row of the queues table.
func (d *Driver) SetPaused(ctx context.Context, q string, paused bool) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	if _, err := d.pool.Exec(ctx, d.stmts.setPaused, q, paused); err != nil {
		return failed(ctx, "set paused", err)
	}
	return nil
}

// Paused lists the paused queues in name order.
func (d *Driver) Paused(ctx context.Context) ([]string, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	rows, err := d.pool.Query(ctx, d.stmts.paused)
	if err != nil {
		return nil, failed(ctx, "paused", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, failed(ctx, "paused", err)
	}
	return out, nil
}

// chunks yields ids in slices of at most n.
func chunks(ids []int64, n int) iter.Seq[[]int64] { return slices.Chunk(ids, n) }

// sortedIDs returns ids in ascending order; RETURNING gives no order.
func sortedIDs(ids []int64) []int64 {
	slices.Sort(ids)
	return ids
}

// Stats counts jobs per queue, ordered by name. Jobs an advisory claimer
// holds are found in pg_locks and counted as Held, like claimed rows.
func (d *Driver) Stats(ctx context.Context) ([]queue.QueueStats, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	rows, err := d.pool.Query(ctx, d.stmts.stats)
	if err != nil {
		return nil, interpret("stats", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (queue.QueueStats, error) {
		var s queue.QueueStats
		err := r.Scan(&s.Queue, &s.Ready, &s.Scheduled, &s.Held, &s.Dead, &s.OldestReadyAge, &s.Paused)
		return s, err
	})
	if err != nil {
		return nil, interpret("stats", err)
	}
	return out, nil
}

var _ queue.QueueCounter = (*Driver)(nil)

// CountQueues counts as Stats does, each count stopping at limit: the
// queues and their claimed rows from queue_names.sql, then per queue
// count_queue.sql, which reads at most about limit index entries per
// state plus a descent per priority.
func (d *Driver) CountQueues(ctx context.Context, limit int64) ([]queue.QueueStats, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	rows, err := d.pool.Query(ctx, d.stmts.queueNames)
	if err != nil {
		return nil, interpret("count queues", err)
	}
	claimed := map[string]int64{}
	names, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (name string, err error) {
		var n int64
		err = r.Scan(&name, &n)
		claimed[name] = n
		return name, err
	})
	if err != nil {
		return nil, interpret("count queues", err)
	}
	return queue.CountEachQueue(ctx, names, func(ctx context.Context, name string) (s queue.QueueStats, err error) {
		err = d.pool.QueryRow(ctx, d.stmts.countQueue, name, limit, claimed[name]).
			Scan(&s.Ready, &s.Scheduled, &s.Held, &s.Dead, &s.OldestReadyAge, &s.Paused)
		return s, interpret("count queues", err)
	})
}

var _ queue.DedupeFinder = (*Driver)(nil)

// FindDedupe returns the id of queue name's job with dedupe key key
// (dedupe_existing.sql, a probe of the unique index jobs_dedupe).
func (d *Driver) FindDedupe(ctx context.Context, name, key string) (int64, bool, error) {
	if d.closed.Load() {
		return 0, false, queue.ErrClosed
	}
	if validText("DedupeKey", key) != nil {
		return 0, false, nil // PostgreSQL stores no such key
	}
	id, ok, err := pgxQuerier{d.pool}.queryID(ctx, d.stmts.dedupeExisting, name, key)
	if err != nil {
		return 0, false, failed(ctx, "find dedupe key", err)
	}
	return id, ok, nil
}

// StatsByKind counts jobs per queue and kind, ordered by queue then kind
// (stats_by_kind.sql), with the states of Stats: jobs an advisory claimer
// holds count as Held.
func (d *Driver) StatsByKind(ctx context.Context) ([]queue.KindStats, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	rows, err := d.pool.Query(ctx, d.stmts.statsByKind)
	if err != nil {
		return nil, interpret("stats by kind", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (queue.KindStats, error) {
		var s queue.KindStats
		err := r.Scan(&s.Queue, &s.Kind, &s.Ready, &s.Scheduled, &s.Held, &s.Dead)
		return s, err
	})
	if err != nil {
		return nil, interpret("stats by kind", err)
	}
	return out, nil
}
