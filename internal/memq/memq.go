// Package memq is an in-memory queue.Driver with lease-based claims. It
// exists to test package queue and the conformance suite itself without a
// database; it is never evidence that a dialect works.
package memq

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

// Store is the shared in-memory table. Migrated false makes every call fail
// with queue.ErrNotMigrated.
type Store struct {
	mu        sync.Mutex
	rows      map[int64]*queue.Job
	nextID    int64
	migrated  bool
	lease     time.Duration
	paused    map[string]bool
	schedules map[string]*queue.ScheduleInfo
	activity  map[activityKey]*queue.ActivityCount
	processes map[string]queue.ProcessInfo
}

// New returns an empty, migrated store whose claims last lease.
func New(lease time.Duration) *Store {
	return &Store{rows: map[int64]*queue.Job{}, migrated: true, lease: lease}
}

// SetMigrated creates (true) or drops (false) the table.
func (s *Store) SetMigrated(m bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.migrated = m
	if !m {
		s.rows = map[int64]*queue.Job{}
	}
}

// Steal gives job id's claim to someone else, as a rescue and re-claim
// would: its token changes and its lease starts over.
func (s *Store) Steal(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.rows[id]; r != nil && r.State == queue.StateClaimed {
		r.Token = rand.Int64()
		r.ClaimedUntil = time.Now().Add(time.Hour)
	}
}

// Driver returns a queue.Driver over the store.
func (s *Store) Driver() queue.Driver { return &driver{s} }

type driver struct{ s *Store }

func (d *driver) Dialect() string { return "memory" }
func (d *driver) Close() error    { return nil }

func (d *driver) Enqueue(ctx context.Context, tx any, jobs []queue.NewJob) ([]int64, error) {
	if tx != nil {
		return nil, queue.ErrUnsupportedTx
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.migrated {
		return nil, queue.ErrNotMigrated
	}
	return s.insert(jobs)
}

// insert stores jobs, all or none. s.mu is held.
func (s *Store) insert(jobs []queue.NewJob) ([]int64, error) {
	keys := map[[2]string]bool{}
	for _, r := range s.rows {
		if r.DedupeKey != "" {
			keys[[2]string{r.Queue, r.DedupeKey}] = true
		}
	}
	for _, j := range jobs {
		if j.DedupeKey == "" {
			continue
		}
		k := [2]string{j.Queue, j.DedupeKey}
		if keys[k] {
			return nil, queue.ErrDuplicate
		}
		keys[k] = true
	}
	now := time.Now()
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		s.nextID++
		runAt := j.RunAt
		if runAt.IsZero() {
			runAt = now.Add(j.Delay)
		}
		s.rows[s.nextID] = &queue.Job{
			ID: s.nextID, Queue: j.Queue, Kind: j.Kind, Payload: slices.Clone(j.Payload), Priority: j.Priority,
			RunAt: runAt, MaxAttempts: j.MaxAttempts, State: queue.StateReady, DedupeKey: j.DedupeKey, CreatedAt: now,
		}
		ids[i] = s.nextID
	}
	return ids, nil
}

func (d *driver) Stats(ctx context.Context) ([]queue.QueueStats, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.migrated {
		return nil, queue.ErrNotMigrated
	}
	now := time.Now()
	by := map[string]*queue.QueueStats{}
	for _, r := range s.rows {
		st := by[r.Queue]
		if st == nil {
			st = &queue.QueueStats{Queue: r.Queue}
			by[r.Queue] = st
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
			st.OldestReadyAge = max(st.OldestReadyAge, now.Sub(r.RunAt).Seconds())
		}
	}
	var out []queue.QueueStats
	for _, st := range by {
		st.Paused = s.paused[st.Queue]
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b queue.QueueStats) int { return strings.Compare(a.Queue, b.Queue) })
	return out, nil
}

func (d *driver) NewClaimer(ctx context.Context) (queue.Claimer, error) {
	return &Claimer{s: d.s}, nil
}

// Claimer is a lease-based claimer over a Store.
type Claimer struct {
	s      *Store
	closed bool
	held   map[int64]int64
}

var _ queue.Claimer = (*Claimer)(nil)

// LeaseDuration is how long a claim lasts without Extend.
func (c *Claimer) LeaseDuration() time.Duration { return c.s.lease }

// Heartbeat is a third of the lease (queue.Claimer).
func (c *Claimer) Heartbeat() time.Duration { return c.s.lease / 3 }

// Abandon makes the claimer forget its claims as a killed process would:
// they stay claimed until their leases expire, and Close no longer
// releases them.
func (c *Claimer) Abandon() {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.held = nil
}

// Stored returns the ids of the stored jobs claimed under this claimer's
// tokens, in id order: what it holds in the store, for the conformance
// suite's HeldLocks.
func (c *Claimer) Stored() []int64 {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	var out []int64
	for id, tok := range c.held {
		if r := c.s.rows[id]; r != nil && r.State == queue.StateClaimed && r.Token == tok {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func (c *Claimer) check(ctx context.Context) error {
	if c.closed {
		return queue.ErrClosed
	}
	if !c.s.migrated {
		return queue.ErrNotMigrated
	}
	return ctx.Err()
}

// Claim implements queue.Claimer.
func (c *Claimer) Claim(ctx context.Context, name string, n int) ([]*queue.Job, error) {
	if n <= 0 {
		return nil, queue.ErrInvalidLimit
	}
	if err := dialect.ValidateQueue(name); err != nil {
		return nil, err
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.check(ctx); err != nil {
		return nil, err
	}
	now := time.Now()
	s.rescue(now)
	var ready []*queue.Job
	for _, r := range s.rows {
		if r.Queue == name && r.State == queue.StateReady && !r.RunAt.After(now) && !s.paused[name] {
			ready = append(ready, r)
		}
	}
	slices.SortFunc(ready, func(a, b *queue.Job) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.RunAt.Compare(b.RunAt), cmp.Compare(a.ID, b.ID))
	})
	ready = ready[:min(n, len(ready))]
	tok := rand.Int64()
	out := make([]*queue.Job, len(ready))
	if c.held == nil {
		c.held = map[int64]int64{}
	}
	for i, r := range ready {
		r.State, r.Token, r.ClaimedUntil = queue.StateClaimed, tok, now.Add(s.lease)
		cp := *r
		cp.Payload = slices.Clone(r.Payload)
		out[i] = &cp
		c.held[r.ID] = tok
	}
	return out, nil
}

// apply runs fn on each row held under its lease and reports lost ones.
func (c *Claimer) apply(ctx context.Context, ls []queue.Lease, fn func(r *queue.Job, i int)) error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := c.check(ctx); err != nil {
		return err
	}
	var done []int64
	for i, l := range ls {
		r := s.rows[l.ID]
		if r == nil || r.State != queue.StateClaimed || r.Token != l.Token {
			continue
		}
		fn(r, i)
		done = append(done, l.ID)
	}
	return queue.LostLeases(ls, done)
}

// Complete implements queue.Claimer.
func (c *Claimer) Complete(ctx context.Context, ls []queue.Lease) error {
	return c.apply(ctx, ls, func(r *queue.Job, _ int) { delete(c.s.rows, r.ID); delete(c.held, r.ID) })
}

// Release implements queue.Claimer.
func (c *Claimer) Release(ctx context.Context, ls []queue.Lease) error {
	return c.apply(ctx, ls, func(r *queue.Job, _ int) {
		r.State, r.Token = queue.StateReady, 0
		delete(c.held, r.ID)
	})
}

// Extend implements queue.Claimer.
func (c *Claimer) Extend(ctx context.Context, ls []queue.Lease) error {
	return c.apply(ctx, ls, func(r *queue.Job, _ int) { r.ClaimedUntil = time.Now().Add(c.s.lease) })
}

// Retry implements queue.Claimer.
func (c *Claimer) Retry(ctx context.Context, rs []queue.RetryParams) error {
	ls := make([]queue.Lease, len(rs))
	for i, r := range rs {
		ls[i] = r.Lease
	}
	return c.apply(ctx, ls, func(r *queue.Job, i int) {
		p := rs[i]
		r.RunAt = time.Now().Add(p.Delay)
		r.State, r.Token = queue.StateReady, 0
		delete(c.held, r.ID)
		if p.Snooze {
			return
		}
		r.Attempt++
		r.LastError = truncate(p.Error)
		r.RunAt = time.Now().Add(p.Delay)
		r.State, r.Token = queue.StateReady, 0
		if p.Dead || r.Attempt >= r.MaxAttempts {
			r.State = queue.StateDead
		}
		delete(c.held, r.ID)
	})
}

func truncate(s string) string {
	if len(s) <= queue.MaxErrorBytes {
		return s
	}
	return strings.ToValidUTF8(s[:queue.MaxErrorBytes], "")
}

// Close implements queue.Claimer: it releases what it still holds.
func (c *Claimer) Close(ctx context.Context) error {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.closed {
		return nil
	}
	for id, tok := range c.held {
		if r := s.rows[id]; r != nil && r.State == queue.StateClaimed && r.Token == tok {
			r.State, r.Token = queue.StateReady, 0
		}
	}
	c.closed, c.held = true, nil
	return nil
}

// rescue gives back the jobs whose leases expired before now and returns
// how many; s.mu is held. A lost lease is a failed run, as in every lease
// dialect.
func (s *Store) rescue(now time.Time) int {
	n := 0
	for _, r := range s.rows {
		if r.State == queue.StateClaimed && r.ClaimedUntil.Before(now) {
			r.Attempt++
			r.LastError = "dbq: lease expired: the holder died or stalled without Extend"
			r.State, r.Token = queue.StateReady, 0
			if r.Attempt >= r.MaxAttempts {
				r.State = queue.StateDead
			}
			n++
		}
	}
	return n
}

func (d *driver) Rescue(ctx context.Context) (int, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.migrated {
		return 0, queue.ErrNotMigrated
	}
	return s.rescue(time.Now()), nil
}

// CountQueues is Stats with each count capped at limit.
func (d *driver) CountQueues(ctx context.Context, limit int64) ([]queue.QueueStats, error) {
	st, err := d.Stats(ctx)
	for i := range st {
		c := &st[i]
		c.Ready, c.Scheduled, c.Held, c.Dead = min(c.Ready, limit), min(c.Scheduled, limit), min(c.Held, limit), min(c.Dead, limit)
	}
	return st, err
}
