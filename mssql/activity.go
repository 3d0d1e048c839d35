package mssql

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"github.com/dbqueue/dbq/queue"
	mssqldb "github.com/microsoft/go-mssqldb"
)

var _ queue.ActivityStore = (*Driver)(nil)

// AddActivity adds counts to their rows in one MERGE
// (sql/activity_add.sql), run again if chosen as a deadlock victim.
func (d *Driver) AddActivity(ctx context.Context, counts []queue.ActivityCount) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	text, err := d.sql.rows(sqlActivityAdd, len(counts))
	if err != nil {
		return err
	}
	args := make([]any, 0, 7*len(counts))
	for i, c := range counts {
		n := strconv.Itoa(i)
		args = append(args, sql.Named("m"+n, c.Minute.UTC()), sql.Named("q"+n, mssqldb.VarChar(c.Queue)),
			sql.Named("k"+n, c.Kind), sql.Named("p"+n, mssqldb.VarChar(c.Process)),
			sql.Named("c"+n, c.Completed), sql.Named("r"+n, c.Retried), sql.Named("d"+n, c.Dead))
	}
	return d.execConflicts(ctx, "add activity", text, args...)
}

// Activity sums the counts per queue and minute (sql/activity.sql).
func (d *Driver) Activity(ctx context.Context, since time.Time) ([]queue.ActivityCount, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	return queryAll(ctx, d, "activity", sqlActivity, func(rows *sql.Rows, c *queue.ActivityCount) error {
		err := rows.Scan(&c.Queue, &c.Minute, &c.Completed, &c.Retried, &c.Dead)
		c.Minute = asUTC(c.Minute)
		return err
	}, sql.Named("since", since.UTC()))
}

// TouchProcess stores or updates the process row (sql/process_touch.sql).
func (d *Driver) TouchProcess(ctx context.Context, p queue.ProcessInfo) error {
	return d.execConflicts(ctx, "touch process", d.sql.text(sqlProcessTouch),
		sql.Named("id", mssqldb.VarChar(p.ID)), sql.Named("host", p.Host), sql.Named("pid", int64(p.PID)),
		sql.Named("queues", mssqldb.VarChar(queue.JoinQueues(p.Queues))), sql.Named("concurrency", int64(p.Concurrency)),
		sql.Named("started", p.StartedAt.UTC()), sql.Named("seen", p.SeenAt.UTC()))
}

// RemoveProcess deletes the process row (sql/process_remove.sql).
func (d *Driver) RemoveProcess(ctx context.Context, id string) error {
	return d.execConflicts(ctx, "remove process", d.sql.text(sqlProcessRemove), sql.Named("id", mssqldb.VarChar(id)))
}

// Processes lists the process rows (sql/processes.sql).
func (d *Driver) Processes(ctx context.Context) ([]queue.ProcessInfo, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	return queryAll(ctx, d, "processes", sqlProcesses, func(rows *sql.Rows, p *queue.ProcessInfo) error {
		var (
			queues    string
			pid, conc int64
		)
		err := rows.Scan(&p.ID, &p.Host, &pid, &queues, &conc, &p.StartedAt, &p.SeenAt)
		p.PID, p.Concurrency, p.Queues = int(pid), int(conc), queue.SplitQueues(queues)
		p.StartedAt, p.SeenAt = asUTC(p.StartedAt), asUTC(p.SeenAt)
		return err
	})
}

// PruneActivity runs the bounded sql/activity_prune.sql, then
// sql/process_prune.sql.
func (d *Driver) PruneActivity(ctx context.Context, p queue.ActivityPrune) (int64, error) {
	if d.closed.Load() {
		return 0, queue.ErrClosed
	}
	res, _, err := retryConflicts(ctx, d.cfg.ClaimAttempts, d.pause, func(ctx context.Context) (sql.Result, error) {
		return d.db.ExecContext(ctx, d.sql.text(sqlActivityPrune), sql.Named("limit", int64(p.Limit)),
			sql.Named("before", p.Before.UTC()))
	})
	if err != nil {
		return 0, classify("prune activity", d.dedupe, err)
	}
	n, _ := res.RowsAffected()
	return n, d.execConflicts(ctx, "prune processes", d.sql.text(sqlProcessPrune),
		sql.Named("before", p.ProcessesSeenBefore.UTC()))
}

// execConflicts runs one autocommit statement, again if chosen as a
// deadlock victim.
func (d *Driver) execConflicts(ctx context.Context, what, text string, args ...any) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	_, _, err := retryConflicts(ctx, d.cfg.ClaimAttempts, d.pause, func(ctx context.Context) (sql.Result, error) {
		return d.db.ExecContext(ctx, text, args...)
	})
	return classify(what, d.dedupe, err)
}
