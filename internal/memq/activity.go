package memq

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/dbqueue/dbq/queue"
)

var _ queue.ActivityStore = (*driver)(nil)

// activityKey is an activity row's key, as the dialects' tables have it.
type activityKey struct {
	minute               time.Time
	queue, kind, process string
}

// AddActivity implements queue.ActivityStore.
func (d *driver) AddActivity(ctx context.Context, counts []queue.ActivityCount) error {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if d.s.activity == nil {
		d.s.activity = map[activityKey]*queue.ActivityCount{}
	}
	for _, c := range counts {
		k := activityKey{c.Minute.UTC(), c.Queue, c.Kind, c.Process}
		row := d.s.activity[k]
		if row == nil {
			row = &queue.ActivityCount{Process: c.Process, Queue: c.Queue, Kind: c.Kind, Minute: k.minute}
			d.s.activity[k] = row
		}
		row.Completed, row.Retried, row.Dead = row.Completed+c.Completed, row.Retried+c.Retried, row.Dead+c.Dead
	}
	return nil
}

// Activity implements queue.ActivityStore.
func (d *driver) Activity(ctx context.Context, since time.Time) ([]queue.ActivityCount, error) {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	sums := map[activityKey]*queue.ActivityCount{}
	for k, c := range d.s.activity {
		if k.minute.Before(since) {
			continue
		}
		sk := activityKey{minute: k.minute, queue: k.queue}
		s := sums[sk]
		if s == nil {
			s = &queue.ActivityCount{Queue: k.queue, Minute: k.minute}
			sums[sk] = s
		}
		s.Completed, s.Retried, s.Dead = s.Completed+c.Completed, s.Retried+c.Retried, s.Dead+c.Dead
	}
	out := make([]queue.ActivityCount, 0, len(sums))
	for _, s := range sums {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b queue.ActivityCount) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), a.Minute.Compare(b.Minute))
	})
	return out, nil
}

// TouchProcess implements queue.ActivityStore.
func (d *driver) TouchProcess(ctx context.Context, p queue.ProcessInfo) error {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if d.s.processes == nil {
		d.s.processes = map[string]queue.ProcessInfo{}
	}
	if old, ok := d.s.processes[p.ID]; ok {
		p.Host, p.PID, p.StartedAt = old.Host, old.PID, old.StartedAt
	}
	p.Queues = slices.Clone(p.Queues)
	d.s.processes[p.ID] = p
	return nil
}

// RemoveProcess implements queue.ActivityStore.
func (d *driver) RemoveProcess(ctx context.Context, id string) error {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	delete(d.s.processes, id)
	return nil
}

// Processes implements queue.ActivityStore.
func (d *driver) Processes(ctx context.Context) ([]queue.ProcessInfo, error) {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := make([]queue.ProcessInfo, 0, len(d.s.processes))
	for _, p := range d.s.processes {
		p.Queues = slices.Clone(p.Queues)
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b queue.ProcessInfo) int {
		return cmp.Or(b.StartedAt.Compare(a.StartedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// PruneActivity implements queue.ActivityStore: the oldest rows first, at
// most p.Limit of them.
func (d *driver) PruneActivity(ctx context.Context, p queue.ActivityPrune) (int64, error) {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	var old []activityKey
	for k := range d.s.activity {
		if k.minute.Before(p.Before) {
			old = append(old, k)
		}
	}
	slices.SortFunc(old, func(a, b activityKey) int { return a.minute.Compare(b.minute) })
	old = old[:min(len(old), p.Limit)]
	for _, k := range old {
		delete(d.s.activity, k)
	}
	for id, pr := range d.s.processes {
		if pr.SeenAt.Before(p.ProcessesSeenBefore) {
			delete(d.s.processes, id)
		}
	}
	return int64(len(old)), nil
}
