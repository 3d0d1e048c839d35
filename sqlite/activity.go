package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"time"

	"github.com/dbqueue/dbq/queue"
)

var _ queue.ActivityStore = (*Driver)(nil)

// activityRow is one count as activity_add.sql reads it from JSON.
type activityRow struct {
	Minute  int64  `json:"m"`
	Queue   string `json:"q"`
	Kind    string `json:"k"`
	Process string `json:"p"`
	Done    int64  `json:"c"`
	Retried int64  `json:"r"`
	Dead    int64  `json:"d"`
}

// AddActivity adds counts to their rows in one statement (activity_add.sql).
func (d *Driver) AddActivity(ctx context.Context, counts []queue.ActivityCount) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	rows := make([]activityRow, len(counts))
	for i, c := range counts {
		rows[i] = activityRow{c.Minute.UnixMicro(), c.Queue, c.Kind, c.Process, c.Completed, c.Retried, c.Dead}
	}
	batch, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	return d.write(ctx, false, func(ctx context.Context, r runner) error {
		_, err := r.exec(ctx, d.stmts.activityAdd, string(batch))
		return err
	})
}

// Activity sums the counts per queue and minute (activity.sql).
func (d *Driver) Activity(ctx context.Context, since time.Time) ([]queue.ActivityCount, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	return readAll(ctx, d, d.stmts.activity, func(rows *sql.Rows) (queue.ActivityCount, error) {
		var (
			c      queue.ActivityCount
			minute int64
		)
		err := rows.Scan(&c.Queue, &minute, &c.Completed, &c.Retried, &c.Dead)
		c.Minute = fromMicros(minute)
		return c, err
	}, since.UnixMicro())
}

// TouchProcess stores or updates the process row (process_touch.sql).
func (d *Driver) TouchProcess(ctx context.Context, p queue.ProcessInfo) error {
	return d.execWrite(ctx, d.stmts.processTouch, p.ID, p.Host, p.PID, queue.JoinQueues(p.Queues), p.Concurrency,
		p.StartedAt.UnixMicro(), p.SeenAt.UnixMicro())
}

// RemoveProcess deletes the process row (process_remove.sql).
func (d *Driver) RemoveProcess(ctx context.Context, id string) error {
	return d.execWrite(ctx, d.stmts.processRemove, id)
}

// Processes lists the process rows (processes.sql).
func (d *Driver) Processes(ctx context.Context) ([]queue.ProcessInfo, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	return readAll(ctx, d, d.stmts.processes, func(rows *sql.Rows) (queue.ProcessInfo, error) {
		var (
			p             queue.ProcessInfo
			queues        string
			started, seen int64
		)
		err := rows.Scan(&p.ID, &p.Host, &p.PID, &queues, &p.Concurrency, &started, &seen)
		p.Queues, p.StartedAt, p.SeenAt = queue.SplitQueues(queues), fromMicros(started), fromMicros(seen)
		return p, err
	})
}

// PruneActivity runs the bounded activity_prune.sql, then
// process_prune.sql, in one write transaction.
func (d *Driver) PruneActivity(ctx context.Context, p queue.ActivityPrune) (int64, error) {
	if d.closed.Load() {
		return 0, queue.ErrClosed
	}
	var n int64
	err := d.write(ctx, true, func(ctx context.Context, r runner) error {
		res, err := r.exec(ctx, d.stmts.activityPrune, p.Before.UnixMicro(), p.Limit)
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		_, err = r.exec(ctx, d.stmts.processPrune, p.ProcessesSeenBefore.UnixMicro())
		return err
	})
	return n, err
}

// execWrite runs one statement in a write of its own.
func (d *Driver) execWrite(ctx context.Context, s *stmt, args ...any) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	return d.write(ctx, false, func(ctx context.Context, r runner) error {
		_, err := r.exec(ctx, s, args...)
		return err
	})
}
