package memq

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/dbqueue/dbq/queue"
)

var _ queue.ScheduleStore = (*driver)(nil)

// UpsertSchedule implements queue.ScheduleStore.
func (d *driver) UpsertSchedule(ctx context.Context, def queue.ScheduleDef) error {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if d.s.schedules == nil {
		d.s.schedules = map[string]*queue.ScheduleInfo{}
	}
	si := d.s.schedules[def.Name]
	if si == nil {
		si = &queue.ScheduleInfo{Name: def.Name}
		d.s.schedules[def.Name] = si
	}
	if si.SpecSince.IsZero() || si.Spec != def.Spec || si.TimeZone != def.TimeZone {
		si.SpecSince = def.At
	}
	si.Spec, si.TimeZone, si.Queue, si.NextTick, si.UpdatedAt = def.Spec, def.TimeZone, def.Queue, def.NextTick, time.Now()
	si.SeenAt = def.At
	return nil
}

// AdvanceSchedule implements queue.ScheduleStore: the check of the last
// tick, its record and the job's insert happen under one lock, as the
// dialects do them in one transaction.
func (d *driver) AdvanceSchedule(ctx context.Context, t queue.Tick) (queue.TickResult, error) {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return queue.TickResult{}, err
	}
	defer unlock()
	si := d.s.schedules[t.Schedule]
	if si == nil || (!si.LastTick.IsZero() && !si.LastTick.Before(t.At)) {
		return queue.TickResult{}, nil
	}
	si.LastTick, si.NextTick, si.UpdatedAt = t.At, t.Next, time.Now()
	res := queue.TickResult{Advanced: true, Paused: si.Paused}
	if si.Paused {
		return res, nil
	}
	for _, r := range d.s.rows {
		if r.Queue == t.Job.Queue && r.DedupeKey == t.Job.DedupeKey {
			res.JobID, res.Existed = r.ID, true
			return res, nil
		}
	}
	ids, err := d.s.insert([]queue.NewJob{t.Job})
	if err != nil {
		return queue.TickResult{}, err
	}
	res.JobID = ids[0]
	return res, nil
}

// Schedules implements queue.ScheduleStore.
func (d *driver) Schedules(ctx context.Context) ([]queue.ScheduleInfo, error) {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := make([]queue.ScheduleInfo, 0, len(d.s.schedules))
	for _, si := range d.s.schedules {
		out = append(out, *si)
	}
	slices.SortFunc(out, func(a, b queue.ScheduleInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// SetSchedulePaused implements queue.ScheduleStore.
func (d *driver) SetSchedulePaused(ctx context.Context, name string, paused bool) error {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	si := d.s.schedules[name]
	if si == nil {
		return queue.ErrScheduleNotFound
	}
	si.Paused, si.UpdatedAt = paused, time.Now()
	return nil
}

// DeleteSchedule implements queue.ScheduleStore.
func (d *driver) DeleteSchedule(ctx context.Context, name string, seenBefore time.Time) error {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	si := d.s.schedules[name]
	if si == nil || (!seenBefore.IsZero() && !si.SeenAt.IsZero() && !si.SeenAt.Before(seenBefore)) {
		return queue.ErrScheduleNotFound
	}
	delete(d.s.schedules, name)
	return nil
}
