package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

var _ queue.ScheduleStore = (*Driver)(nil)

// UpsertSchedule stores def or updates its definition
// (schedule_upsert.sql).
func (d *Driver) UpsertSchedule(ctx context.Context, def queue.ScheduleDef) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	_, err := d.pool.Exec(ctx, d.stmts.scheduleUpsert, def.Name, def.Spec, def.TimeZone, def.Queue, nullTime(def.NextTick), def.At)
	return failed(ctx, "upsert schedule", err)
}

// AdvanceSchedule runs schedule_advance.sql and, when it changed the row
// and the schedule is not paused, EnqueueUnique, in one transaction: the
// row lock the UPDATE takes makes any other advance of the schedule wait
// for the commit and then find the tick taken.
func (d *Driver) AdvanceSchedule(ctx context.Context, t queue.Tick) (queue.TickResult, error) {
	if d.closed.Load() {
		return queue.TickResult{}, queue.ErrClosed
	}
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return queue.TickResult{}, failed(ctx, "advance schedule", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = tx.Rollback(rctx) // after Commit: nothing to do
	}()
	var r queue.TickResult
	err = tx.QueryRow(ctx, d.stmts.scheduleAdvance, t.Schedule, t.At, nullTime(t.Next)).Scan(&r.Paused)
	if errors.Is(err, pgx.ErrNoRows) {
		return queue.TickResult{}, nil
	}
	if err != nil {
		return queue.TickResult{}, failed(ctx, "advance schedule", err)
	}
	r.Advanced = true
	if !r.Paused {
		if r.JobID, r.Existed, err = d.EnqueueUnique(ctx, tx, t.Job); err != nil {
			return queue.TickResult{}, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return queue.TickResult{}, failed(ctx, "advance schedule", err)
	}
	return r, nil
}

// Schedules lists the stored schedules in name order (schedules.sql).
func (d *Driver) Schedules(ctx context.Context) ([]queue.ScheduleInfo, error) {
	return collect(ctx, d, "schedules", d.stmts.scheduleList, func(r pgx.CollectableRow) (queue.ScheduleInfo, error) {
		var (
			s           queue.ScheduleInfo
			last, next  pgtype.Timestamptz
			since, seen pgtype.Timestamptz
		)
		err := r.Scan(&s.Name, &s.Spec, &s.TimeZone, &s.Queue, &last, &next, &s.Paused, &s.UpdatedAt, &since, &seen)
		s.LastTick, s.NextTick, s.UpdatedAt = utc(last), utc(next), s.UpdatedAt.UTC()
		s.SpecSince, s.SeenAt = utc(since), utc(seen)
		return s, err
	})
}

// SetSchedulePaused pauses or resumes a stored schedule
// (schedule_set_paused.sql).
func (d *Driver) SetSchedulePaused(ctx context.Context, name string, paused bool) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	tag, err := d.pool.Exec(ctx, d.stmts.scheduleSetPaused, name, paused)
	if err != nil {
		return failed(ctx, "set schedule paused", err)
	}
	if tag.RowsAffected() == 0 {
		return queue.ErrScheduleNotFound
	}
	return nil
}

// DeleteSchedule removes a stored schedule, or only one not seen since
// seenBefore when that is set (schedule_delete.sql).
func (d *Driver) DeleteSchedule(ctx context.Context, name string, seenBefore time.Time) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	tag, err := d.pool.Exec(ctx, d.stmts.scheduleDelete, name, nullTime(seenBefore))
	if err != nil {
		return failed(ctx, "delete schedule", err)
	}
	if tag.RowsAffected() == 0 {
		return queue.ErrScheduleNotFound
	}
	return nil
}

func nullTime(t time.Time) pgtype.Timestamptz { return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()} }

func utc(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}
