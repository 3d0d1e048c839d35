package mssql

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	mssqldb "github.com/microsoft/go-mssqldb"
)

var _ queue.Admin = (*Driver)(nil)

// idChunk is the most ids one Cancel or RetryDead statement carries, one
// parameter each, under SQL Server's 2,100 per request.
const idChunk = 1000

// retryDeadBatch is the most dead jobs one retry_dead_all statement
// revives.
const retryDeadBatch = 1000

// EnqueueUnique stores job unless its queue holds a job with its dedupe
// key — ready, scheduled, held or dead — and returns the id of the one or
// the other and whether it existed (sql/enqueue_unique.sql). It never
// fails with queue.ErrDuplicate: it reads the key under an update lock
// held to the end of the transaction, so a racing enqueue of the key
// waits and then finds it, and the job it finds cannot complete meanwhile.
// tx is nil (the driver's own transaction, run again if chosen as a
// deadlock victim) or the caller's *sql.Tx, inside a savepoint as for
// Enqueue, so that a failure leaves it usable. In the caller's
// transaction the key stays locked until it ends: a Complete of the job
// found, or another enqueue of the key, waits for that. A key or kind that
// is not valid UTF-8 gives queue.ErrInvalidJob before anything is sent
// (checkKey, checkKind).
func (d *Driver) EnqueueUnique(ctx context.Context, tx any, job queue.NewJob) (int64, bool, error) {
	if d.closed.Load() {
		return 0, false, queue.ErrClosed
	}
	if job.DedupeKey == "" {
		return 0, false, fmt.Errorf("%w: EnqueueUnique needs a DedupeKey", queue.ErrInvalidJob)
	}
	if err := cmp.Or(checkKey(job.DedupeKey), checkKind(job.Kind)); err != nil {
		return 0, false, err
	}
	switch tx := tx.(type) {
	case nil:
		r, _, err := retryConflicts(ctx, d.cfg.ClaimAttempts, d.pause, func(ctx context.Context) (unique, error) {
			own, err := d.db.BeginTx(ctx, nil)
			if err != nil {
				return unique{}, err
			}
			r, err := d.enqueueUnique(ctx, own, job)
			if err != nil {
				_ = own.Rollback()
				return unique{}, err
			}
			return r, own.Commit()
		})
		if err != nil {
			return 0, false, classify("enqueue unique", d.dedupe, err)
		}
		return r.id, r.existed, nil
	case *sql.Tx:
		if tx == nil {
			return 0, false, fmt.Errorf("%w: nil *sql.Tx", queue.ErrUnsupportedTx)
		}
		if _, err := tx.ExecContext(ctx, d.sql.text(sqlSavepoint)); err != nil {
			return 0, false, classify("enqueue unique", d.dedupe, err)
		}
		r, err := d.enqueueUnique(ctx, tx, job)
		if err != nil {
			_, _ = tx.ExecContext(context.WithoutCancel(ctx), d.sql.text(sqlRollbackSavepoint))
			return 0, false, classify("enqueue unique", d.dedupe, err)
		}
		return r.id, r.existed, nil
	}
	return 0, false, fmt.Errorf("%w: %T (the mssql dialect takes a *sql.Tx)", queue.ErrUnsupportedTx, tx)
}

// unique is what enqueue_unique.sql returns.
type unique struct {
	id      int64
	existed bool
}

func (d *Driver) enqueueUnique(ctx context.Context, tx *sql.Tx, j queue.NewJob) (unique, error) {
	payload := j.Payload
	if payload == nil {
		payload = []byte{}
	}
	s, ms := splitDuration(j.Delay)
	var r unique
	err := tx.QueryRowContext(ctx, d.sql.text(sqlEnqueueUnique),
		sql.Named("queue", mssqldb.VarChar(j.Queue)), sql.Named("kind", j.Kind), sql.Named("payload", payload),
		sql.Named("priority", j.Priority),
		sql.Named("run_at", sql.NullTime{Time: j.RunAt.UTC(), Valid: !j.RunAt.IsZero()}),
		sql.Named("delay_s", s), sql.Named("delay_ms", ms),
		sql.Named("max_attempts", int32(j.MaxAttempts)), sql.Named("dedupe_key", j.DedupeKey),
	).Scan(&r.id, &r.existed)
	if errors.Is(err, sql.ErrNoRows) {
		// The statement always ends with one row; only a changed statement
		// could get here.
		return r, errors.New("dbq: mssql: enqueue unique returned no id")
	}
	return r, err
}

// Jobs lists the stored jobs that match f in id order (sql/jobs.sql): the
// ready, scheduled and dead ones in jobs and the held ones, as claimed,
// in jobs_inflight. Filters (queue, state, kind) are bind parameters; the
// statement is planned for their values on each call.
func (d *Driver) Jobs(ctx context.Context, f queue.JobFilter) ([]*queue.Job, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	limit := f.Limit
	if limit <= 0 {
		limit = queue.DefaultListLimit
	}
	rows, err := d.db.QueryContext(ctx, d.sql.text(sqlJobs),
		sql.Named("limit", int32(min(limit, queue.MaxListLimit))), sql.Named("after", f.AfterID),
		sql.Named("queue", mssqldb.VarChar(f.Queue)), sql.Named("state", mssqldb.VarChar(string(f.State))),
		sql.Named("kind", f.Kind))
	if err != nil {
		return nil, classify("jobs", d.dedupe, err)
	}
	defer rows.Close()
	var out []*queue.Job
	for rows.Next() {
		var (
			j             queue.Job
			state         string
			token         sql.NullInt64
			until         sql.NullTime
			lastErr, dkey sql.NullString
		)
		if err := rows.Scan(&j.ID, &j.Queue, &j.Kind, &j.Payload, &j.Priority, &j.RunAt, &j.Attempt, &j.MaxAttempts,
			&state, &token, &until, &lastErr, &dkey, &j.CreatedAt); err != nil {
			return nil, classify("jobs", d.dedupe, err)
		}
		// A job that moved between the tables while they were read comes
		// twice, next to itself: keep it once.
		if n := len(out); n > 0 && out[n-1].ID == j.ID {
			continue
		}
		if j.Payload == nil {
			j.Payload = []byte{}
		}
		j.State, j.Token = queue.State(state), token.Int64
		j.LastError, j.DedupeKey = lastErr.String, dkey.String
		j.RunAt, j.CreatedAt = j.RunAt.UTC(), j.CreatedAt.UTC()
		if until.Valid {
			j.ClaimedUntil = until.Time.UTC()
		}
		out = append(out, &j)
	}
	if err := rows.Err(); err != nil {
		return nil, classify("jobs", d.dedupe, err)
	}
	return out, nil
}

// Cancel deletes those of ids that no one holds — the ones in jobs:
// ready, scheduled or dead — with their dedupe keys, and returns the ids
// it deleted in ascending order (sql/cancel.sql). Held jobs are in
// jobs_inflight, whichever strategy claimed them, and stay with their
// holders. At most 1,000 ids go in one statement; a deadlock victim's
// statement is run again.
func (d *Driver) Cancel(ctx context.Context, ids []int64) ([]int64, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	var out []int64
	for chunk := range slices.Chunk(distinctIDs(ids), idChunk) {
		got, err := d.idStatement(ctx, "cancel", sqlCancel, chunk)
		out = append(out, got...)
		if err != nil {
			return sortIDs(out), err
		}
	}
	return sortIDs(out), nil
}

// RetryDead makes dead jobs of queueName ready now, with attempt 0 and
// last_error kept, and returns their ids in ascending order: those of ids
// (sql/retry_dead_ids.sql, 1,000 a statement), or with ids nil every dead
// job of the queue (sql/retry_dead_all.sql, 1,000 a statement until fewer
// come back). Ids of other queues' jobs, or of jobs not dead, are left
// alone.
func (d *Driver) RetryDead(ctx context.Context, queueName string, ids []int64) ([]int64, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	if err := dialect.ValidateQueue(queueName); err != nil {
		return nil, err
	}
	q := sql.Named("queue", mssqldb.VarChar(queueName))
	var out []int64
	if ids != nil {
		for chunk := range slices.Chunk(distinctIDs(ids), idChunk) {
			got, err := d.idStatement(ctx, "retry dead", sqlRetryDeadIDs, chunk, q)
			out = append(out, got...)
			if err != nil {
				return sortIDs(out), err
			}
		}
		return sortIDs(out), nil
	}
	for {
		got, _, err := retryConflicts(ctx, d.cfg.ClaimAttempts, d.pause, func(ctx context.Context) ([]int64, error) {
			return dialect.QueryIDs(ctx, d.db, d.sql.text(sqlRetryDeadAll), q, sql.Named("batch", int32(retryDeadBatch)))
		})
		if err != nil {
			return sortIDs(out), classify("retry dead", d.dedupe, err)
		}
		out = append(out, got...)
		if len(got) < retryDeadBatch {
			return sortIDs(out), nil
		}
	}
}

// idStatement runs statement name with the VALUES rows (@i0), (@i1), ...
// of ids and the parameters shared, running a deadlock victim again (each
// is one statement or one XACT_ABORT transaction, rolled back whole), and
// returns the ids it reports.
func (d *Driver) idStatement(ctx context.Context, op, name string, ids []int64, shared ...any) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	stmt, err := d.sql.rows(name, len(ids))
	if err != nil {
		return nil, err
	}
	args := append(make([]any, 0, len(ids)+len(shared)), shared...)
	for k, id := range ids {
		args = append(args, named("i", k, id))
	}
	got, _, err := retryConflicts(ctx, d.cfg.ClaimAttempts, d.pause, func(ctx context.Context) ([]int64, error) {
		return dialect.QueryIDs(ctx, d.db, stmt, args...)
	})
	if err != nil {
		return nil, classify(op, d.dedupe, err)
	}
	return got, nil
}

// SetPaused pauses or resumes queueName: it updates the queue's row of
// the queues table, or inserts one, in one transaction whose key-range
// lock keeps two first calls from both inserting (sql/set_paused.sql).
// Claims read the row in the claim statement itself.
func (d *Driver) SetPaused(ctx context.Context, queueName string, paused bool) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	if err := dialect.ValidateQueue(queueName); err != nil {
		return err
	}
	_, _, err := retryConflicts(ctx, d.cfg.ClaimAttempts, d.pause, func(ctx context.Context) (sql.Result, error) {
		return d.db.ExecContext(ctx, d.sql.text(sqlSetPaused),
			sql.Named("queue", mssqldb.VarChar(queueName)), sql.Named("paused", paused))
	})
	if err != nil {
		return classify("set paused", d.dedupe, err)
	}
	return nil
}

// Paused lists the paused queues in name order.
func (d *Driver) Paused(ctx context.Context) ([]string, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	return queryAll(ctx, d, "paused", sqlPaused, func(rows *sql.Rows, q *string) error { return rows.Scan(q) })
}

// queryAll runs statement name with args, reads each row into a T with
// scan, and classifies any error as op's.
func queryAll[T any](ctx context.Context, d *Driver, op, name string, scan func(rows *sql.Rows, v *T) error, args ...any) ([]T, error) {
	rows, err := d.db.QueryContext(ctx, d.sql.text(name), args...)
	if err != nil {
		return nil, classify(op, d.dedupe, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			return nil, classify(op, d.dedupe, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, classify(op, d.dedupe, err)
	}
	return out, nil
}

// distinctIDs returns ids without repeats, in their first order: an id
// twice in a VALUES list would match its row twice.
func distinctIDs(ids []int64) []int64 {
	seen := make(map[int64]bool, len(ids))
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// sortIDs sorts ids ascending in place; OUTPUT gives no order.
func sortIDs(ids []int64) []int64 {
	slices.Sort(ids)
	return ids
}

// Stats counts the jobs of every queue, ordered by queue name, and says
// which are paused. Held jobs are those in jobs_inflight, where both
// strategies put the jobs they claim.
func (d *Driver) Stats(ctx context.Context) ([]queue.QueueStats, error) {
	return queryAll(ctx, d, "stats", sqlStats, func(rows *sql.Rows, s *queue.QueueStats) error {
		var ageMicros int64
		if err := rows.Scan(&s.Queue, &s.Ready, &s.Scheduled, &s.Held, &s.Dead, &ageMicros, &s.Paused); err != nil {
			return err
		}
		s.OldestReadyAge = float64(ageMicros) / 1e6
		return nil
	})
}

// StatsByKind counts the jobs of every queue and kind
// (sql/stats_by_kind.sql), as Stats counts them per queue; jobs with no
// kind count under kind "". Ordered by queue, then kind in byte order:
// SQL Server orders NVARCHAR by UTF-16 code unit, which puts characters
// outside the BMP before U+E000–U+FFFF, so the rows are sorted again.
func (d *Driver) StatsByKind(ctx context.Context) ([]queue.KindStats, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	out, err := queryAll(ctx, d, "stats by kind", sqlStatsByKind, func(rows *sql.Rows, s *queue.KindStats) error {
		return rows.Scan(&s.Queue, &s.Kind, &s.Ready, &s.Scheduled, &s.Held, &s.Dead)
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b queue.KindStats) int {
		return cmp.Or(strings.Compare(a.Queue, b.Queue), strings.Compare(a.Kind, b.Kind))
	})
	return out, nil
}

// The statements of CountQueues and FindDedupe.
const (
	sqlQueueNames = "queue_names"
	sqlCountQueue = "count_queue"
	sqlFindDedupe = "find_dedupe"
)

var _ queue.QueueCounter = (*Driver)(nil)

// CountQueues counts as Stats does, each count stopping at limit: the
// queues and their held jobs from queue_names.sql, then per queue
// count_queue.sql, which reads at most about limit rows per state plus a
// seek per priority.
func (d *Driver) CountQueues(ctx context.Context, limit int64) ([]queue.QueueStats, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	type named struct {
		queue string
		held  int64
	}
	rows, err := queryAll(ctx, d, "count queues", sqlQueueNames, func(rows *sql.Rows, n *named) error {
		return rows.Scan(&n.queue, &n.held)
	})
	if err != nil {
		return nil, err
	}
	names := make([]string, len(rows))
	held := make(map[string]int64, len(rows))
	for i, n := range rows {
		names[i], held[n.queue] = n.queue, n.held
	}
	return queue.CountEachQueue(ctx, names, func(ctx context.Context, name string) (s queue.QueueStats, err error) {
		var ageMicros int64
		err = d.db.QueryRowContext(ctx, d.sql.text(sqlCountQueue), sql.Named("queue", mssqldb.VarChar(name)),
			sql.Named("limit", limit), sql.Named("held", held[name])).
			Scan(&s.Ready, &s.Scheduled, &s.Held, &s.Dead, &ageMicros, &s.Paused)
		s.OldestReadyAge = float64(ageMicros) / 1e6
		return s, classify("count queues", d.dedupe, err)
	})
}

var _ queue.DedupeFinder = (*Driver)(nil)

// FindDedupe returns the id of queue name's job with dedupe key key
// (find_dedupe.sql, a probe of jobs_dedupe's primary key).
func (d *Driver) FindDedupe(ctx context.Context, name, key string) (int64, bool, error) {
	if d.closed.Load() {
		return 0, false, queue.ErrClosed
	}
	ids, err := queryAll(ctx, d, "find dedupe key", sqlFindDedupe, func(rows *sql.Rows, id *int64) error { return rows.Scan(id) },
		sql.Named("queue", mssqldb.VarChar(name)), sql.Named("dedupe_key", key))
	if err != nil || len(ids) == 0 {
		return 0, false, err
	}
	return ids[0], true, nil
}
