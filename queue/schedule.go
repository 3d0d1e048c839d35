package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dbqueue/dbq/dialect"
)

// ErrScheduleNotFound: no schedule of that name is stored.
var ErrScheduleNotFound = errors.New("dbq: schedule not found")

// ScheduleDef is what a scheduler stores about a schedule it runs.
type ScheduleDef struct {
	Name     string
	Spec     string // as written, e.g. "*/5 * * * *" or "@every 30s"
	TimeZone string // IANA name, e.g. "Europe/Berlin"
	Queue    string // of the jobs it makes
	// NextTick is when the schedule fires next, for display.
	NextTick time.Time
	// At is when the definition is stored, on the storing scheduler's clock
	// (the clock its ticks are computed on): stored as seen_at, and as
	// spec_since when the spec or time zone changes. Queue.UpsertSchedule
	// sets it to time.Now() when zero.
	At time.Time
}

// ScheduleInfo is a stored schedule, as [Queue.Schedules] lists it.
type ScheduleInfo struct {
	Name     string    `json:"name"`
	Spec     string    `json:"spec"`
	TimeZone string    `json:"time_zone"`
	Queue    string    `json:"queue"`
	LastTick time.Time `json:"last_tick,omitzero"` // zero (absent in JSON): no tick enqueued yet
	NextTick time.Time `json:"next_tick"`
	Paused   bool      `json:"paused"`
	// SpecSince is when the stored spec and time zone were stored over
	// different ones (or the schedule was first stored): ticks at or before
	// it are not owed by this spec. Zero for a schedule stored before
	// schema version 00008 and not changed since.
	SpecSince time.Time `json:"spec_since,omitzero"`
	// SeenAt is when a scheduler last stored the definition; running
	// schedulers refresh it (package schedule: SeenInterval). Zero:
	// unknown.
	SeenAt time.Time `json:"seen_at,omitzero"`
	// UpdatedAt is when a scheduler last stored the schedule or a tick, or
	// it was paused or resumed, on the database clock.
	UpdatedAt time.Time `json:"updated_at"`
}

// Tick is one firing of a schedule for [ScheduleStore.AdvanceSchedule].
type Tick struct {
	Schedule string
	At       time.Time // the tick; stored as the last tick
	Next     time.Time // the tick after it, stored as the next tick
	Job      NewJob    // the job the tick makes; DedupeKey is set
}

// TickResult is what AdvanceSchedule did.
type TickResult struct {
	// Advanced: this call recorded the tick. False means the stored last
	// tick was already at or past it (another scheduler took it).
	Advanced bool
	// Paused: the tick was recorded but the schedule is paused, so no job
	// was enqueued.
	Paused bool
	// JobID is the job of the tick: enqueued now, or, when Existed, the one
	// that already held the tick's dedupe key.
	JobID   int64
	Existed bool
}

// MaxScheduleName is the longest schedule name; names follow the rules of
// queue names ([dialect.ValidateQueue]).
const MaxScheduleName = dialect.MaxQueueLen

// MaxSpecLen and MaxTimeZoneLen bound a stored spec and time zone name.
const (
	MaxSpecLen     = 200
	MaxTimeZoneLen = 64
)

// ValidateScheduleName checks a schedule name: the rules of a queue name,
// under ErrInvalidJob.
func ValidateScheduleName(name string) error {
	if err := dialect.ValidateQueue(name); err != nil {
		return fmt.Errorf("%w: schedule name %q must match [A-Za-z0-9_.:-]+ and be at most %d bytes", ErrInvalidJob, name, MaxScheduleName)
	}
	return nil
}

func (q *Queue) scheduleStore() (ScheduleStore, error) {
	if q.closed.Load() {
		return nil, ErrClosed
	}
	return q.drv, nil
}

// UpsertSchedule stores a schedule's definition; see [ScheduleStore].
func (q *Queue) UpsertSchedule(ctx context.Context, def ScheduleDef) error {
	s, err := q.scheduleStore()
	if err != nil {
		return err
	}
	if err := ValidateScheduleName(def.Name); err != nil {
		return err
	}
	if err := dialect.ValidateQueue(def.Queue); err != nil {
		return err
	}
	switch {
	case def.Spec == "" || len(def.Spec) > MaxSpecLen:
		return fmt.Errorf("%w: schedule %s: spec of %d bytes (want 1..%d)", ErrInvalidJob, def.Name, len(def.Spec), MaxSpecLen)
	case def.TimeZone == "" || len(def.TimeZone) > MaxTimeZoneLen:
		return fmt.Errorf("%w: schedule %s: time zone of %d bytes (want 1..%d)", ErrInvalidJob, def.Name, len(def.TimeZone), MaxTimeZoneLen)
	}
	if def.At.IsZero() {
		def.At = time.Now()
	}
	def.NextTick, def.At = def.NextTick.UTC(), def.At.UTC()
	return s.UpsertSchedule(ctx, def)
}

// AdvanceSchedule records a tick and enqueues its job, exactly once across
// every caller; see [ScheduleStore]. The job is checked as Enqueue checks
// one and needs a DedupeKey.
func (q *Queue) AdvanceSchedule(ctx context.Context, t Tick) (TickResult, error) {
	s, err := q.scheduleStore()
	if err != nil {
		return TickResult{}, err
	}
	if err := ValidateScheduleName(t.Schedule); err != nil {
		return TickResult{}, err
	}
	if t.At.IsZero() || t.Job.DedupeKey == "" {
		return TickResult{}, fmt.Errorf("%w: a tick needs a time and its job a DedupeKey", ErrInvalidJob)
	}
	if err := q.check(&t.Job); err != nil {
		return TickResult{}, err
	}
	t.At, t.Next = t.At.UTC(), t.Next.UTC()
	return s.AdvanceSchedule(ctx, t)
}

// Schedules lists the stored schedules in name order.
func (q *Queue) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	s, err := q.scheduleStore()
	if err != nil {
		return nil, err
	}
	return s.Schedules(ctx)
}

// PauseSchedule stops a stored schedule from enqueueing jobs: its ticks
// pass (and are recorded) without one until ResumeSchedule.
func (q *Queue) PauseSchedule(ctx context.Context, name string) error {
	return q.setSchedulePaused(ctx, name, true)
}

// ResumeSchedule lets a paused schedule enqueue jobs again from its next
// tick on; the ticks that passed while it was paused are not made up.
func (q *Queue) ResumeSchedule(ctx context.Context, name string) error {
	return q.setSchedulePaused(ctx, name, false)
}

func (q *Queue) setSchedulePaused(ctx context.Context, name string, paused bool) error {
	s, err := q.scheduleStore()
	if err != nil {
		return err
	}
	if err := ValidateScheduleName(name); err != nil {
		return err
	}
	return s.SetSchedulePaused(ctx, name, paused)
}

// DeleteSchedule removes a stored schedule: its row, last tick and paused
// flag (jobs it enqueued stay). A scheduler that still runs the schedule
// stores it again when it next refreshes its schedules. A name not stored
// gives ErrScheduleNotFound.
func (q *Queue) DeleteSchedule(ctx context.Context, name string) error {
	s, err := q.scheduleStore()
	if err != nil {
		return err
	}
	if err := ValidateScheduleName(name); err != nil {
		return err
	}
	return s.DeleteSchedule(ctx, name, time.Time{})
}

// PruneSchedules removes the stored schedules that no scheduler has stored
// since seenBefore (seen_at before it, or unknown) and returns their names.
// Each is removed by a statement that checks seen_at again, so a schedule a
// scheduler refreshes meanwhile stays.
func (q *Queue) PruneSchedules(ctx context.Context, seenBefore time.Time) ([]string, error) {
	s, err := q.scheduleStore()
	if err != nil {
		return nil, err
	}
	if seenBefore.IsZero() {
		return nil, fmt.Errorf("%w: PruneSchedules needs a time", ErrInvalidConfig)
	}
	all, err := s.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	var gone []string
	for _, si := range all {
		if !si.SeenAt.IsZero() && !si.SeenAt.Before(seenBefore) {
			continue
		}
		err := s.DeleteSchedule(ctx, si.Name, seenBefore.UTC())
		switch {
		case errors.Is(err, ErrScheduleNotFound):
		case err != nil:
			return gone, err
		default:
			gone = append(gone, si.Name)
		}
	}
	return gone, nil
}
