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

// ScheduleStore is implemented by drivers that keep recurring schedules in
// the schedules table (migration 00004) beside the jobs table. Package
// schedule runs schedules on it; every shipped dialect implements it, and
// Queue's schedule methods return ErrUnsupported otherwise.
//
// The one promise that matters is AdvanceSchedule's: whatever the number
// of processes that call it for the same tick, at once or later, exactly
// one of them gets Advanced and enqueues the tick's job.
type ScheduleStore interface {
	// UpsertSchedule stores def, or updates the stored schedule of its name:
	// spec, time zone, queue and next tick. The last tick and the paused
	// flag of a stored schedule stay as they are.
	UpsertSchedule(ctx context.Context, def ScheduleDef) error
	// AdvanceSchedule records tick t.At as the schedule's last tick — only
	// if the stored last tick is older (or none) — and, in the same
	// transaction and only then, enqueues t.Job unless the schedule is
	// paused. The job's DedupeKey is set and guards the tick a second time:
	// a job of the queue that holds it is left alone and reported in
	// TickResult.Existed. A tick of a schedule that is not stored is not
	// Advanced: callers upsert first.
	AdvanceSchedule(ctx context.Context, t Tick) (TickResult, error)
	// Schedules lists the stored schedules in name order.
	Schedules(ctx context.Context) ([]ScheduleInfo, error)
	// SetSchedulePaused pauses or resumes a stored schedule; one that is
	// not stored gives ErrScheduleNotFound.
	SetSchedulePaused(ctx context.Context, name string, paused bool) error
}

// ScheduleDef is what a scheduler stores about a schedule it runs.
type ScheduleDef struct {
	Name     string
	Spec     string // as written, e.g. "*/5 * * * *" or "@every 30s"
	TimeZone string // IANA name, e.g. "Europe/Berlin"
	Queue    string // of the jobs it makes
	// NextTick is when the schedule fires next, for display.
	NextTick time.Time
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
	s, ok := q.drv.(ScheduleStore)
	if !ok {
		return nil, fmt.Errorf("%w: %s has no schedules", ErrUnsupported, q.drv.Dialect())
	}
	return s, nil
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
	def.NextTick = def.NextTick.UTC()
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
