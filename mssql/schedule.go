package mssql

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/dbqueue/dbq/queue"
	mssqldb "github.com/microsoft/go-mssqldb"
)

var _ queue.ScheduleStore = (*Driver)(nil)

// UpsertSchedule stores def or updates its definition
// (sql/schedule_upsert.sql), run again if chosen as a deadlock victim.
func (d *Driver) UpsertSchedule(ctx context.Context, def queue.ScheduleDef) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	_, _, err := retryConflicts(ctx, d.cfg.ClaimAttempts, d.pause, func(ctx context.Context) (sql.Result, error) {
		return d.db.ExecContext(ctx, d.sql.text(sqlScheduleUpsert),
			sql.Named("name", mssqldb.VarChar(def.Name)), sql.Named("spec", def.Spec),
			sql.Named("time_zone", mssqldb.VarChar(def.TimeZone)), sql.Named("queue", mssqldb.VarChar(def.Queue)),
			sql.Named("next_tick", nullTime(def.NextTick)), sql.Named("at", def.At.UTC()))
	})
	return classify("upsert schedule", d.dedupe, err)
}

// AdvanceSchedule runs sql/schedule_advance.sql and, when it put out a row
// and the schedule is not paused, EnqueueUnique, in one transaction of the
// driver's, run again whole if chosen as a deadlock victim.
func (d *Driver) AdvanceSchedule(ctx context.Context, t queue.Tick) (queue.TickResult, error) {
	if d.closed.Load() {
		return queue.TickResult{}, queue.ErrClosed
	}
	r, _, err := retryConflicts(ctx, d.cfg.ClaimAttempts, d.pause, func(ctx context.Context) (queue.TickResult, error) {
		var r queue.TickResult
		tx, err := d.db.BeginTx(ctx, nil)
		if err != nil {
			return r, err
		}
		defer tx.Rollback() // after Commit: nothing to do
		err = tx.QueryRowContext(ctx, d.sql.text(sqlScheduleAdvance), sql.Named("name", mssqldb.VarChar(t.Schedule)),
			sql.Named("tick", t.At.UTC()), sql.Named("next_tick", nullTime(t.Next))).Scan(&r.Paused)
		if errors.Is(err, sql.ErrNoRows) {
			return queue.TickResult{}, nil
		}
		if err != nil {
			return r, err
		}
		r.Advanced = true
		if !r.Paused {
			if r.JobID, r.Existed, err = d.EnqueueUnique(ctx, tx, t.Job); err != nil {
				return r, err
			}
		}
		return r, tx.Commit()
	})
	if err != nil {
		return queue.TickResult{}, classify("advance schedule", d.dedupe, err)
	}
	return r, nil
}

// Schedules lists the stored schedules in name order (sql/schedules.sql).
func (d *Driver) Schedules(ctx context.Context) ([]queue.ScheduleInfo, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	rows, err := d.db.QueryContext(ctx, d.sql.text(sqlSchedules))
	if err != nil {
		return nil, classify("schedules", d.dedupe, err)
	}
	defer rows.Close()
	var out []queue.ScheduleInfo
	for rows.Next() {
		var (
			s           queue.ScheduleInfo
			last, next  sql.NullTime
			since, seen sql.NullTime
		)
		if err := rows.Scan(&s.Name, &s.Spec, &s.TimeZone, &s.Queue, &last, &next, &s.Paused, &s.UpdatedAt, &since, &seen); err != nil {
			return nil, classify("schedules", d.dedupe, err)
		}
		s.LastTick, s.NextTick, s.UpdatedAt = utcOf(last), utcOf(next), asUTC(s.UpdatedAt)
		s.SpecSince, s.SeenAt = utcOf(since), utcOf(seen)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, classify("schedules", d.dedupe, err)
	}
	return out, nil
}

// SetSchedulePaused pauses or resumes a stored schedule
// (sql/schedule_set_paused.sql).
func (d *Driver) SetSchedulePaused(ctx context.Context, name string, paused bool) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	found, _, err := retryConflicts(ctx, d.cfg.ClaimAttempts, d.pause, func(ctx context.Context) (bool, error) {
		var got string
		err := d.db.QueryRowContext(ctx, d.sql.text(sqlScheduleSetPaused),
			sql.Named("name", mssqldb.VarChar(name)), sql.Named("paused", paused)).Scan(&got)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return classify("set schedule paused", d.dedupe, err)
	}
	if !found {
		return queue.ErrScheduleNotFound
	}
	return nil
}

// DeleteSchedule removes a stored schedule, or only one not seen since
// seenBefore when that is set (sql/schedule_delete.sql).
func (d *Driver) DeleteSchedule(ctx context.Context, name string, seenBefore time.Time) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	found, _, err := retryConflicts(ctx, d.cfg.ClaimAttempts, d.pause, func(ctx context.Context) (bool, error) {
		var got string
		err := d.db.QueryRowContext(ctx, d.sql.text(sqlScheduleDelete),
			sql.Named("name", mssqldb.VarChar(name)), sql.Named("seen_before", nullTime(seenBefore))).Scan(&got)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return classify("delete schedule", d.dedupe, err)
	}
	if !found {
		return queue.ErrScheduleNotFound
	}
	return nil
}

func nullTime(t time.Time) sql.NullTime { return sql.NullTime{Time: t.UTC(), Valid: !t.IsZero()} }

// asUTC reads a DATETIME2, which holds UTC and which the driver hands back
// as a wall clock in UTC, as a UTC time.
func asUTC(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

func utcOf(t sql.NullTime) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return asUTC(t.Time)
}
