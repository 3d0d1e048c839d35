package postgres

import (
	"context"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
)

var _ queue.ActivityStore = (*Driver)(nil)

// AddActivity adds counts to their rows with one INSERT ... ON CONFLICT
// whose columns are array parameters (activity_add.sql).
func (d *Driver) AddActivity(ctx context.Context, counts []queue.ActivityCount) error {
	n := len(counts)
	minutes, queues, kinds, procs := make([]time.Time, n), make([]string, n), make([]string, n), make([]string, n)
	done, retried, dead := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, c := range counts {
		minutes[i], queues[i], kinds[i], procs[i] = c.Minute, c.Queue, c.Kind, c.Process
		done[i], retried[i], dead[i] = c.Completed, c.Retried, c.Dead
	}
	return d.exec(ctx, "add activity", d.stmts.activityAdd, minutes, queues, kinds, procs, done, retried, dead)
}

// Activity sums the counts per queue and minute (activity.sql).
func (d *Driver) Activity(ctx context.Context, since time.Time) ([]queue.ActivityCount, error) {
	return collect(ctx, d, "activity", d.stmts.activity, func(r pgx.CollectableRow) (queue.ActivityCount, error) {
		var c queue.ActivityCount
		err := r.Scan(&c.Queue, &c.Minute, &c.Completed, &c.Retried, &c.Dead)
		c.Minute = c.Minute.UTC()
		return c, err
	}, since)
}

// TouchProcess stores or updates the process row (process_touch.sql).
func (d *Driver) TouchProcess(ctx context.Context, p queue.ProcessInfo) error {
	return d.exec(ctx, "touch process", d.stmts.processTouch, p.ID, p.Host, p.PID, queue.JoinQueues(p.Queues),
		p.Concurrency, p.StartedAt, p.SeenAt)
}

// RemoveProcess deletes the process row (process_remove.sql).
func (d *Driver) RemoveProcess(ctx context.Context, id string) error {
	return d.exec(ctx, "remove process", d.stmts.processRemove, id)
}

// Processes lists the process rows (processes.sql).
func (d *Driver) Processes(ctx context.Context) ([]queue.ProcessInfo, error) {
	return collect(ctx, d, "processes", d.stmts.processes, func(r pgx.CollectableRow) (queue.ProcessInfo, error) {
		var (
			p      queue.ProcessInfo
			queues string
		)
		err := r.Scan(&p.ID, &p.Host, &p.PID, &queues, &p.Concurrency, &p.StartedAt, &p.SeenAt)
		p.Queues, p.StartedAt, p.SeenAt = queue.SplitQueues(queues), p.StartedAt.UTC(), p.SeenAt.UTC()
		return p, err
	})
}

// PruneActivity runs the bounded activity_prune.sql, then
// process_prune.sql.
func (d *Driver) PruneActivity(ctx context.Context, p queue.ActivityPrune) (int64, error) {
	if d.closed.Load() {
		return 0, queue.ErrClosed
	}
	tag, err := d.pool.Exec(ctx, d.stmts.activityPrune, p.Before, p.Limit)
	if err != nil {
		return 0, failed(ctx, "prune activity", err)
	}
	return tag.RowsAffected(), d.exec(ctx, "prune processes", d.stmts.processPrune, p.ProcessesSeenBefore)
}

// exec runs one statement on the pool.
func (d *Driver) exec(ctx context.Context, op, text string, args ...any) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	_, err := d.pool.Exec(ctx, text, args...)
	return failed(ctx, op, err)
}

// collect runs a read on the pool and scans each row.
func collect[T any](ctx context.Context, d *Driver, op, text string, scan pgx.RowToFunc[T], args ...any) ([]T, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	rows, err := d.pool.Query(ctx, text, args...)
	if err != nil {
		return nil, failed(ctx, op, err)
	}
	out, err := pgx.CollectRows(rows, scan)
	if err != nil {
		return nil, failed(ctx, op, err)
	}
	return out, nil
}
