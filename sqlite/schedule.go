package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/dbqueue/dbq/queue"
)

var _ queue.ScheduleStore = (*Driver)(nil)

// UpsertSchedule stores def or updates its definition
// (schedule_upsert.sql).
func (d *Driver) UpsertSchedule(ctx context.Context, def queue.ScheduleDef) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	return d.write(ctx, false, func(ctx context.Context, r runner) error {
		_, err := r.exec(ctx, d.stmts.scheduleUpsert, def.Name, def.Spec, def.TimeZone, def.Queue, micros(def.NextTick), micros(def.At))
		return err
	})
}

// AdvanceSchedule runs schedule_advance.sql and, when it changed the row
// and the schedule is not paused, the unique insert of the tick's job, in
// one write transaction: no other writer runs in between.
func (d *Driver) AdvanceSchedule(ctx context.Context, t queue.Tick) (queue.TickResult, error) {
	if d.closed.Load() {
		return queue.TickResult{}, queue.ErrClosed
	}
	var res queue.TickResult
	err := d.write(ctx, true, func(ctx context.Context, r runner) error {
		res = queue.TickResult{}
		rows, err := r.query(ctx, d.stmts.scheduleAdvance, t.Schedule, t.At.UnixMicro(), micros(t.Next))
		if err != nil {
			return err
		}
		for rows.Next() {
			res.Advanced = true
			if err := rows.Scan(&res.Paused); err != nil {
				rows.Close()
				return interpret(err)
			}
		}
		if err := interpret(rows.Err()); err != nil {
			rows.Close()
			return err
		}
		rows.Close()
		if !res.Advanced || res.Paused {
			return nil
		}
		res.JobID, res.Existed, err = d.insertUnique(ctx, r, t.Job)
		return err
	})
	if err != nil {
		return queue.TickResult{}, err
	}
	return res, nil
}

// Schedules lists the stored schedules in name order (schedules.sql).
func (d *Driver) Schedules(ctx context.Context) ([]queue.ScheduleInfo, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	var out []queue.ScheduleInfo
	err := retry(ctx, func() error {
		out = out[:0]
		rows, err := runner{d: d}.query(ctx, d.stmts.scheduleList)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				s           queue.ScheduleInfo
				last, next  sql.NullInt64
				since, seen sql.NullInt64
				updated     int64
			)
			if err := rows.Scan(&s.Name, &s.Spec, &s.TimeZone, &s.Queue, &last, &next, &s.Paused, &updated, &since, &seen); err != nil {
				return interpret(err)
			}
			s.LastTick, s.NextTick, s.UpdatedAt = fromNullMicros(last), fromNullMicros(next), fromMicros(updated)
			s.SpecSince, s.SeenAt = fromNullMicros(since), fromNullMicros(seen)
			out = append(out, s)
		}
		return interpret(rows.Err())
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SetSchedulePaused pauses or resumes a stored schedule
// (schedule_set_paused.sql).
func (d *Driver) SetSchedulePaused(ctx context.Context, name string, paused bool) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	return d.write(ctx, false, func(ctx context.Context, r runner) error {
		res, err := r.exec(ctx, d.stmts.scheduleSetPaused, name, paused)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return queue.ErrScheduleNotFound
		}
		return nil
	})
}

// DeleteSchedule removes a stored schedule, or only one not seen since
// seenBefore when that is set (schedule_delete.sql).
func (d *Driver) DeleteSchedule(ctx context.Context, name string, seenBefore time.Time) error {
	if d.closed.Load() {
		return queue.ErrClosed
	}
	return d.write(ctx, false, func(ctx context.Context, r runner) error {
		res, err := r.exec(ctx, d.stmts.scheduleDelete, name, micros(seenBefore))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err == nil && n == 0 {
			return queue.ErrScheduleNotFound
		}
		return nil
	})
}

// micros is t in microseconds since the epoch, or NULL for the zero time.
func micros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func fromNullMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}
