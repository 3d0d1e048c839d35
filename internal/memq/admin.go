package memq

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/dbqueue/dbq/queue"
)

var _ queue.Admin = (*driver)(nil)

func (s *Store) lock(ctx context.Context) (unlock func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if !s.migrated {
		s.mu.Unlock()
		return nil, queue.ErrNotMigrated
	}
	return s.mu.Unlock, nil
}

// EnqueueUnique implements queue.Admin.
func (d *driver) EnqueueUnique(ctx context.Context, tx any, job queue.NewJob) (int64, bool, error) {
	if tx != nil {
		return 0, false, queue.ErrUnsupportedTx
	}
	for {
		unlock, err := d.s.lock(ctx)
		if err != nil {
			return 0, false, err
		}
		for _, r := range d.s.rows {
			if r.Queue == job.Queue && r.DedupeKey == job.DedupeKey {
				unlock()
				return r.ID, true, nil
			}
		}
		unlock()
		// Enqueue takes the lock again, so another caller may store the key
		// in between: then look again, as the SQL dialects do.
		ids, err := d.Enqueue(ctx, nil, []queue.NewJob{job})
		if err == nil {
			return ids[0], false, nil
		}
		if !errors.Is(err, queue.ErrDuplicate) {
			return 0, false, err
		}
	}
}

// Jobs implements queue.Admin.
func (d *driver) Jobs(ctx context.Context, f queue.JobFilter) ([]*queue.Job, error) {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	var out []*queue.Job
	for _, r := range d.s.rows {
		if r.ID <= f.AfterID || f.Queue != "" && r.Queue != f.Queue || f.State != "" && r.State != f.State ||
			f.Kind != "" && r.Kind != f.Kind {
			continue
		}
		cp := *r
		cp.Payload = slices.Clone(r.Payload)
		out = append(out, &cp)
	}
	slices.SortFunc(out, func(a, b *queue.Job) int { return cmp.Compare(a.ID, b.ID) })
	return out[:min(len(out), f.Limit)], nil
}

var _ queue.DedupeFinder = (*driver)(nil)

// FindDedupe implements queue.DedupeFinder. A job without a key has none
// to find, as in the SQL dialects, whose key column is NULL then.
func (d *driver) FindDedupe(ctx context.Context, name, key string) (int64, bool, error) {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return 0, false, err
	}
	defer unlock()
	for _, r := range d.s.rows {
		if key != "" && r.Queue == name && r.DedupeKey == key {
			return r.ID, true, nil
		}
	}
	return 0, false, nil
}

// StatsByKind implements queue.Admin.
func (d *driver) StatsByKind(ctx context.Context) ([]queue.KindStats, error) {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	now := time.Now()
	by := map[[2]string]*queue.KindStats{}
	for _, r := range d.s.rows {
		k := [2]string{r.Queue, r.Kind}
		st := by[k]
		if st == nil {
			st = &queue.KindStats{Queue: r.Queue, Kind: r.Kind}
			by[k] = st
		}
		switch {
		case r.State == queue.StateDead:
			st.Dead++
		case r.State == queue.StateClaimed:
			st.Held++
		case r.RunAt.After(now):
			st.Scheduled++
		default:
			st.Ready++
		}
	}
	out := make([]queue.KindStats, 0, len(by))
	for _, st := range by {
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b queue.KindStats) int {
		return cmp.Or(strings.Compare(a.Queue, b.Queue), strings.Compare(a.Kind, b.Kind))
	})
	return out, nil
}

// Cancel implements queue.Admin.
func (d *driver) Cancel(ctx context.Context, ids []int64) ([]int64, error) {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	var out []int64
	for _, id := range ids {
		if r := d.s.rows[id]; r != nil && r.State != queue.StateClaimed {
			delete(d.s.rows, id)
			out = append(out, id)
		}
	}
	return out, nil
}

// RetryDead implements queue.Admin.
func (d *driver) RetryDead(ctx context.Context, name string, ids []int64) ([]int64, error) {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	var out []int64
	revive := func(r *queue.Job) {
		if r != nil && r.Queue == name && r.State == queue.StateDead {
			r.State, r.Attempt, r.RunAt = queue.StateReady, 0, time.Now()
			out = append(out, r.ID)
		}
	}
	if ids == nil {
		for _, r := range d.s.rows {
			revive(r)
		}
	} else {
		for _, id := range ids {
			revive(d.s.rows[id])
		}
	}
	slices.Sort(out)
	return out, nil
}

// SetPaused implements queue.Admin.
func (d *driver) SetPaused(ctx context.Context, name string, paused bool) error {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if d.s.paused == nil {
		d.s.paused = map[string]bool{}
	}
	if paused {
		d.s.paused[name] = true
	} else {
		delete(d.s.paused, name)
	}
	return nil
}

// Paused implements queue.Admin.
func (d *driver) Paused(ctx context.Context) ([]string, error) {
	unlock, err := d.s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	out := make([]string, 0, len(d.s.paused))
	for q := range d.s.paused {
		out = append(out, q)
	}
	slices.Sort(out)
	return out, nil
}
