package mysql

import (
	"context"
	"database/sql"
	"time"

	"github.com/dbqueue/dbq/queue"
)

var _ queue.ScheduleStore = (*Driver)(nil)

// The schedule statements (sql/schedule*.sql).
const (
	sqlScheduleUpsert    = "schedule_upsert"
	sqlScheduleAdvance   = "schedule_advance"
	sqlSchedulePaused    = "schedule_paused"
	sqlSchedules         = "schedules"
	sqlScheduleSetPaused = "schedule_set_paused"
	sqlScheduleDelete    = "schedule_delete"
)

// UpsertSchedule stores def or updates its definition
// (schedule_upsert.sql).
func (d *Driver) UpsertSchedule(ctx context.Context, def queue.ScheduleDef) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	next, at := nullTime(def.NextTick), formatTime(def.At)
	return d.retry(ctx, func() error {
		_, err := d.db.ExecContext(ctx, d.stmts.get(sqlScheduleUpsert, 0),
			def.Name, def.Spec, def.TimeZone, def.Queue, next, at, at,
			def.Spec, def.TimeZone, at,
			def.Spec, def.TimeZone, def.Queue, next, at)
		return d.classify("upsert schedule", err)
	})
}

// AdvanceSchedule runs schedule_advance.sql and, when it changed the row
// and the schedule is not paused, EnqueueUnique, in one READ COMMITTED
// transaction, run again whole after a deadlock.
func (d *Driver) AdvanceSchedule(ctx context.Context, t queue.Tick) (queue.TickResult, error) {
	if d.closed.Load() {
		return queue.TickResult{}, queue.ErrClosed
	}
	var res queue.TickResult
	err := d.retry(ctx, func() error {
		res = queue.TickResult{}
		tx, err := beginRC(ctx, d.db)
		if err != nil {
			return d.classify("advance schedule", err)
		}
		defer tx.Rollback() // after Commit: nothing to do
		at := formatTime(t.At)
		r, err := tx.ExecContext(ctx, d.stmts.get(sqlScheduleAdvance, 0), at, nullTime(t.Next), t.Schedule, at)
		if err != nil {
			return d.classify("advance schedule", err)
		}
		if n, err := r.RowsAffected(); err != nil || n == 0 {
			return d.classify("advance schedule", err)
		}
		res.Advanced = true
		if err := tx.QueryRowContext(ctx, d.stmts.get(sqlSchedulePaused, 0), t.Schedule).Scan(&res.Paused); err != nil {
			return d.classify("advance schedule", err)
		}
		if !res.Paused {
			if res.JobID, res.Existed, err = d.EnqueueUnique(ctx, tx, t.Job); err != nil {
				return err
			}
		}
		return d.classify("advance schedule", tx.Commit())
	})
	if err != nil {
		return queue.TickResult{}, err
	}
	return res, nil
}

// Schedules lists the stored schedules in name order (schedules.sql).
func (d *Driver) Schedules(ctx context.Context) ([]queue.ScheduleInfo, error) {
	return list(ctx, d, "schedules", sqlSchedules, func(rows *sql.Rows) (s queue.ScheduleInfo, err error) {
		var last, next, updated, since, seen utcTime
		err = rows.Scan(&s.Name, &s.Spec, &s.TimeZone, &s.Queue, &last, &next, &s.Paused, &updated, &since, &seen)
		s.LastTick, s.NextTick, s.UpdatedAt, s.SpecSince, s.SeenAt = last.T, next.T, updated.T, since.T, seen.T
		return s, err
	})
}

// SetSchedulePaused pauses or resumes a stored schedule
// (schedule_set_paused.sql). updated_at changes with every call, so the
// affected-row count tells a stored schedule from a missing one.
func (d *Driver) SetSchedulePaused(ctx context.Context, name string, paused bool) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	var n int64
	err := d.retry(ctx, func() error {
		r, err := d.db.ExecContext(ctx, d.stmts.get(sqlScheduleSetPaused, 0), paused, name)
		if err != nil {
			return d.classify("set schedule paused", err)
		}
		n, err = r.RowsAffected()
		return d.classify("set schedule paused", err)
	})
	if err == nil && n == 0 {
		return queue.ErrScheduleNotFound
	}
	return err
}

// DeleteSchedule removes a stored schedule, or only one not seen since
// seenBefore when that is set (schedule_delete.sql).
func (d *Driver) DeleteSchedule(ctx context.Context, name string, seenBefore time.Time) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	before := nullTime(seenBefore)
	var n int64
	err := d.retry(ctx, func() error {
		r, err := d.db.ExecContext(ctx, d.stmts.get(sqlScheduleDelete, 0), name, before, before)
		if err != nil {
			return d.classify("delete schedule", err)
		}
		n, err = r.RowsAffected()
		return d.classify("delete schedule", err)
	})
	if err == nil && n == 0 {
		return queue.ErrScheduleNotFound
	}
	return err
}

// nullTime renders t as formatTime does, or NULL for the zero time.
func nullTime(t time.Time) sql.NullString {
	return sql.NullString{String: formatTime(t), Valid: !t.IsZero()}
}
