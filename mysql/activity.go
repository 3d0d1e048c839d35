package mysql

import (
	"context"
	"database/sql"
	"time"

	"github.com/dbqueue/dbq/queue"
)

var _ queue.ActivityStore = (*Driver)(nil)

// AddActivity adds counts to their rows with one INSERT ... ON DUPLICATE
// KEY UPDATE of .N rows (activity_add.sql), again after a deadlock.
func (d *Driver) AddActivity(ctx context.Context, counts []queue.ActivityCount) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	args := make([]any, 0, 7*len(counts))
	for _, c := range counts {
		args = append(args, formatTime(c.Minute), c.Queue, c.Kind, c.Process, c.Completed, c.Retried, c.Dead)
	}
	return d.exec(ctx, "add activity", d.stmts.get(sqlActivityAdd, len(counts)), args...)
}

// Activity sums the counts per queue and minute (activity.sql).
func (d *Driver) Activity(ctx context.Context, since time.Time) ([]queue.ActivityCount, error) {
	return list(ctx, d, "activity", sqlActivity, func(rows *sql.Rows) (queue.ActivityCount, error) {
		var (
			c      queue.ActivityCount
			minute utcTime
		)
		err := rows.Scan(&c.Queue, &minute, &c.Completed, &c.Retried, &c.Dead)
		c.Minute = minute.T
		return c, err
	}, formatTime(since))
}

// TouchProcess stores or updates the process row (process_touch.sql).
func (d *Driver) TouchProcess(ctx context.Context, p queue.ProcessInfo) error {
	queues, seen := queue.JoinQueues(p.Queues), formatTime(p.SeenAt)
	return d.exec(ctx, "touch process", d.stmts.get(sqlProcessTouch, 0), p.ID, p.Host, p.PID, queues, p.Concurrency,
		formatTime(p.StartedAt), seen, queues, p.Concurrency, seen)
}

// RemoveProcess deletes the process row (process_remove.sql).
func (d *Driver) RemoveProcess(ctx context.Context, id string) error {
	return d.exec(ctx, "remove process", d.stmts.get(sqlProcessRemove, 0), id)
}

// Processes lists the process rows (processes.sql).
func (d *Driver) Processes(ctx context.Context) ([]queue.ProcessInfo, error) {
	return list(ctx, d, "processes", sqlProcesses, func(rows *sql.Rows) (queue.ProcessInfo, error) {
		var (
			p             queue.ProcessInfo
			queues        string
			started, seen utcTime
		)
		err := rows.Scan(&p.ID, &p.Host, &p.PID, &queues, &p.Concurrency, &started, &seen)
		p.Queues, p.StartedAt, p.SeenAt = queue.SplitQueues(queues), started.T, seen.T
		return p, err
	})
}

// PruneActivity runs the bounded activity_prune.sql, then
// process_prune.sql.
func (d *Driver) PruneActivity(ctx context.Context, p queue.ActivityPrune) (int64, error) {
	if d.closed.Load() {
		return 0, queue.ErrClosed
	}
	var n int64
	err := d.retry(ctx, func() error {
		r, err := d.db.ExecContext(ctx, d.stmts.get(sqlActivityPrune, 0), formatTime(p.Before), p.Limit)
		if err != nil {
			return d.classify("prune activity", err)
		}
		n, _ = r.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, d.exec(ctx, "prune processes", d.stmts.get(sqlProcessPrune, 0), formatTime(p.ProcessesSeenBefore))
}

// exec runs one statement, again after a deadlock.
func (d *Driver) exec(ctx context.Context, what, text string, args ...any) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	return d.retry(ctx, func() error {
		_, err := d.db.ExecContext(ctx, text, args...)
		return d.classify(what, err)
	})
}
