package postgres

import (
	"context"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
)

var _ queue.ActivityStore = (*Driver)(nil)

// AddActivity adds counts to their rows in one statement (activity_add.sql).
func (d *Driver) AddActivity(ctx context.Context, counts []queue.ActivityCount) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	n := len(counts)
	minutes, queues, kinds, procs := make([]time.Time, n), make([]string, n), make([]string, n), make([]string, n)
	done, retried, dead := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, c := range counts {
		minutes[i], queues[i], kinds[i], procs[i] = c.Minute, c.Queue, c.Kind, c.Process
		done[i], retried[i], dead[i] = c.Completed, c.Retried, c.Dead
	}
	_, err := d.pool.Exec(ctx, d.stmts.activityAdd, minutes, queues, kinds, procs, done, retried, dead)
	return failed(ctx, "add activity", err)
}

// Activity sums the counts per queue and minute (activity.sql).
func (d *Driver) Activity(ctx context.Context, since time.Time) ([]queue.ActivityCount, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	rows, err := d.pool.Query(ctx, d.stmts.activity, since)
	if err != nil {
		return nil, failed(ctx, "activity", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (queue.ActivityCount, error) {
		var c queue.ActivityCount
		err := r.Scan(&c.Queue, &c.Minute, &c.Completed, &c.Retried, &c.Dead)
		c.Minute = c.Minute.UTC()
		return c, err
	})
	return out, failed(ctx, "activity", err)
}

// TouchProcess stores or updates the process row (process_touch.sql).
func (d *Driver) TouchProcess(ctx context.Context, p queue.ProcessInfo) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	_, err := d.pool.Exec(ctx, d.stmts.processTouch, p.ID, p.Host, p.PID, queue.JoinQueues(p.Queues),
		p.Concurrency, p.StartedAt, p.SeenAt)
	return failed(ctx, "touch process", err)
}

// RemoveProcess deletes the process row (process_remove.sql).
func (d *Driver) RemoveProcess(ctx context.Context, id string) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	_, err := d.pool.Exec(ctx, d.stmts.processRemove, id)
	return failed(ctx, "remove process", err)
}

// Processes lists the process rows (processes.sql).
func (d *Driver) Processes(ctx context.Context) ([]queue.ProcessInfo, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	rows, err := d.pool.Query(ctx, d.stmts.processes)
	if err != nil {
		return nil, failed(ctx, "processes", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (queue.ProcessInfo, error) {
		var (
			p      queue.ProcessInfo
			queues string
		)
		err := r.Scan(&p.ID, &p.Host, &p.PID, &queues, &p.Concurrency, &p.StartedAt, &p.SeenAt)
		p.Queues, p.StartedAt, p.SeenAt = queue.SplitQueues(queues), p.StartedAt.UTC(), p.SeenAt.UTC()
		return p, err
	})
	return out, failed(ctx, "processes", err)
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
	if _, err := d.pool.Exec(ctx, d.stmts.processPrune, p.ProcessesSeenBefore); err != nil {
		return tag.RowsAffected(), failed(ctx, "prune processes", err)
	}
	return tag.RowsAffected(), nil
}
