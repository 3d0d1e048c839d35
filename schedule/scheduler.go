package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

// Missed says what a scheduler does with ticks that passed while no
// scheduler ran the schedule (downtime, a deploy, a long pause of the
// process).
type Missed int

const (
	// MissedLatest enqueues only the latest missed tick and passes over the
	// others. The default.
	MissedLatest Missed = iota
	// MissedNone enqueues no missed tick: the latest tick is enqueued only
	// if it is at most Config.Grace old.
	MissedNone
	// MissedEach enqueues each missed tick, oldest first, up to
	// Schedule.MaxMissed of the latest ones.
	MissedEach
)

// String returns "latest", "none" or "each".
func (m Missed) String() string {
	switch m {
	case MissedLatest:
		return "latest"
	case MissedNone:
		return "none"
	case MissedEach:
		return "each"
	}
	return fmt.Sprintf("Missed(%d)", int(m))
}

// DefaultMaxMissed is Schedule.MaxMissed's default.
const DefaultMaxMissed = 10

// Schedule is one recurring job.
type Schedule struct {
	// Name identifies the schedule in the schedules table, across every
	// process that runs it and every edit of its other fields: its row,
	// last tick and paused flag are the name's. The rules of a queue name,
	// at most 64 bytes. Required.
	Name string
	// Spec says when it fires: a standard 5-field cron spec ("*/5 * * * *";
	// day of week 0 or 7 is Sunday), a 6-field one starting with seconds
	// ("*/10 * * * * *"), a descriptor
	// (@hourly, @daily, @weekly, @monthly, @yearly) or "@every 30s" (ticks
	// at multiples of the duration since the Unix epoch, so every process
	// computes the same ticks). It may start with CRON_TZ=ZONE. Required.
	Spec string
	// TimeZone is the IANA zone the spec's times are in. Default UTC (or
	// the spec's CRON_TZ).
	TimeZone string
	// Queue, Kind, Payload, Priority and MaxAttempts describe the job each
	// tick makes. Queue is required; Kind is optional (see queue.Args);
	// MaxAttempts 0 means the Queue's default.
	Queue       string
	Kind        string
	Payload     []byte
	Priority    int16
	MaxAttempts int
	// Missed is the policy for ticks missed while no scheduler ran.
	// Default MissedLatest.
	Missed Missed
	// MaxMissed caps the missed ticks MissedEach enqueues. Default 10.
	MaxMissed int
}

// SkipReason says why a tick made no job in this scheduler.
type SkipReason string

// The reasons a tick is skipped. They are a fixed set, so metrics labelled
// by them stay bounded.
const (
	// SkipMissed: passed over after downtime for a later tick (MissedLatest,
	// MissedNone).
	SkipMissed SkipReason = "missed"
	// SkipLate: the latest tick was older than Config.Grace (MissedNone).
	SkipLate SkipReason = "late"
	// SkipOverCap: a missed tick beyond Schedule.MaxMissed (MissedEach).
	SkipOverCap SkipReason = "over_cap"
	// SkipTaken: another scheduler recorded the tick first; it made the
	// job. With N schedulers, each tick is taken N-1 times.
	SkipTaken SkipReason = "taken"
	// SkipPaused: the schedule is paused (`dbq schedules pause`).
	SkipPaused SkipReason = "paused"
	// SkipDuplicate: a job with the tick's dedupe key was already stored.
	SkipDuplicate SkipReason = "duplicate"
)

// SkipReasons lists every SkipReason, for code that pre-creates series.
func SkipReasons() []SkipReason {
	return []SkipReason{SkipMissed, SkipLate, SkipOverCap, SkipTaken, SkipPaused, SkipDuplicate}
}

// Hooks observe a Scheduler, for metrics (package metrics implements them)
// and logs. They are called from the scheduler's goroutine and must be
// quick. Embed NopHooks to implement only some.
type Hooks interface {
	// TickEnqueued: this scheduler recorded tick and enqueued job jobID.
	TickEnqueued(schedule string, tick time.Time, jobID int64)
	// TicksSkipped: n ticks of the schedule made no job here, for reason.
	TicksSkipped(schedule string, reason SkipReason, n int)
	// TickFailed: recording a tick failed; it is tried again.
	TickFailed(schedule string, err error)
}

// NopHooks does nothing.
type NopHooks struct{}

var _ Hooks = NopHooks{}

// TickEnqueued does nothing.
func (NopHooks) TickEnqueued(string, time.Time, int64) {}

// TicksSkipped does nothing.
func (NopHooks) TicksSkipped(string, SkipReason, int) {}

// TickFailed does nothing.
func (NopHooks) TickFailed(string, error) {}

// Clock is the time a Scheduler reads and waits on. Tests give it a fake.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config tunes a Scheduler. The zero value means the defaults below.
type Config struct {
	// Grace is how old the latest tick may be and still be enqueued under
	// MissedNone. Default 1 minute.
	Grace time.Duration
	// MaxWait bounds one wait between looks at the clock, so that a wall
	// clock set forward is noticed. Default 30s.
	MaxWait time.Duration
	// RetryDelay is the first wait after a failed tick; it doubles up to
	// MaxWait. Default 1s.
	RetryDelay time.Duration
	// Logger defaults to the Queue's.
	Logger *slog.Logger
	// Hooks default to none.
	Hooks Hooks
	// Clock defaults to the system clock.
	Clock Clock
}

// Scheduler runs schedules on a Queue: it enqueues each tick's job, once
// across every Scheduler of every process that runs the schedule.
type Scheduler struct {
	q       *queue.Queue
	cfg     Config
	entries []*entry
	// registered: the schedules were stored and read (register).
	registered bool
	// refreshAt is when the definitions are stored again (SeenInterval).
	refreshAt time.Time
}

// SeenInterval is how often a running Scheduler stores its schedules'
// definitions again, which refreshes their seen_at (and stores again one
// that was deleted while it still runs it).
const SeenInterval = 5 * time.Minute

// StaleAfter is how long a stored schedule may go unseen — no scheduler
// storing its definition — before `dbq schedules list` and the dashboard
// mark it stale: 12 × SeenInterval, so a scheduler that is down or cut off
// from the database for less than an hour does not get its schedules marked.
const StaleAfter = time.Hour

// Stale reports whether no scheduler has stored s for StaleAfter before
// now (or ever, as far as its row knows).
func Stale(s queue.ScheduleInfo, now time.Time) bool {
	return s.SeenAt.IsZero() || now.Sub(s.SeenAt) > StaleAfter
}

type entry struct {
	s    Schedule
	spec *Spec
	// from: every tick after it is due; ticks at or before it are done
	// (recorded by someone, or passed over).
	from time.Time
	// retryAt and retries pace a schedule whose tick failed.
	retryAt time.Time
	retries int
}

// New checks schedules and returns a Scheduler for them on q. Names must
// be distinct.
func New(q *queue.Queue, schedules []Schedule, cfg Config) (*Scheduler, error) {
	if q == nil {
		return nil, fmt.Errorf("%w: schedule.New needs a queue", queue.ErrInvalidConfig)
	}
	if cfg.Grace == 0 {
		cfg.Grace = time.Minute
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 30 * time.Second
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = q.Config().Logger
	}
	if cfg.Hooks == nil {
		cfg.Hooks = NopHooks{}
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	if cfg.Grace < 0 || cfg.MaxWait < 0 || cfg.RetryDelay < 0 {
		return nil, fmt.Errorf("%w: negative Grace, MaxWait or RetryDelay", queue.ErrInvalidConfig)
	}
	sc := &Scheduler{q: q, cfg: cfg}
	seen := map[string]bool{}
	for _, s := range schedules {
		if err := queue.ValidateScheduleName(s.Name); err != nil {
			return nil, err
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("%w: schedule %s given twice", queue.ErrInvalidConfig, s.Name)
		}
		seen[s.Name] = true
		if err := dialect.ValidateQueue(s.Queue); err != nil {
			return nil, fmt.Errorf("%w (schedule %s)", err, s.Name)
		}
		if s.Kind != "" {
			if err := queue.ValidateKind(s.Kind); err != nil {
				return nil, fmt.Errorf("%w (schedule %s)", err, s.Name)
			}
		}
		spec, err := Parse(s.Spec, s.TimeZone)
		if err != nil {
			return nil, fmt.Errorf("%w (schedule %s)", err, s.Name)
		}
		if s.MaxMissed == 0 {
			s.MaxMissed = DefaultMaxMissed
		}
		switch {
		case s.Missed < MissedLatest || s.Missed > MissedEach:
			return nil, fmt.Errorf("%w: schedule %s: unknown %v", queue.ErrInvalidConfig, s.Name, s.Missed)
		case s.MaxMissed < 1 || s.MaxMissed > 10_000:
			return nil, fmt.Errorf("%w: schedule %s: MaxMissed %d not in 1..10000", queue.ErrInvalidConfig, s.Name, s.MaxMissed)
		case s.MaxAttempts < 0:
			return nil, fmt.Errorf("%w: schedule %s: MaxAttempts %d < 0", queue.ErrInvalidConfig, s.Name, s.MaxAttempts)
		}
		sc.entries = append(sc.entries, &entry{s: s, spec: spec})
	}
	return sc, nil
}

// Run stores the schedules (creating their rows, updating their
// definitions) and enqueues their ticks until ctx ends, then returns nil.
// Failures to reach the database are logged, reported to Hooks and retried;
// a schema that lacks the schedules table (queue.ErrNotMigrated), a driver
// without schedules (queue.ErrUnsupported) and a closed Queue end Run with
// that error.
func (sc *Scheduler) Run(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := sc.register(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		if fatal(err) {
			return err
		}
		sc.cfg.Logger.Warn("dbq: schedule: storing the schedules failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-sc.cfg.Clock.After(sc.backoff(attempt)):
		}
	}
	for {
		if err := sc.Step(ctx); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-sc.cfg.Clock.After(sc.wait()):
		}
	}
}

func fatal(err error) bool {
	return errors.Is(err, queue.ErrNotMigrated) || errors.Is(err, queue.ErrUnsupported) || errors.Is(err, queue.ErrClosed)
}

func (sc *Scheduler) backoff(attempt int) time.Duration {
	d := sc.cfg.RetryDelay << min(attempt, 16)
	d = min(d, sc.cfg.MaxWait)
	return d/2 + rand.N(d/2+1) // jittered: schedulers that failed together retry apart
}

// register upserts every schedule and reads where each stands: the ticks
// due are those after both the stored last tick and the time the stored
// spec was set (spec_since, which the upsert moves to now when it changes
// the spec), so a changed spec fires nothing its predecessor owed. A
// schedule with neither starts now.
func (sc *Scheduler) register(ctx context.Context) error {
	now := sc.cfg.Clock.Now()
	if err := sc.store(ctx, now); err != nil {
		return err
	}
	stored, err := sc.q.Schedules(ctx)
	if err != nil {
		return err
	}
	from := make(map[string]time.Time, len(stored))
	for _, s := range stored {
		from[s.Name] = s.LastTick
		if s.SpecSince.After(s.LastTick) {
			from[s.Name] = s.SpecSince
		}
	}
	for _, e := range sc.entries {
		e.from = now
		if t := from[e.s.Name]; !t.IsZero() {
			e.from = t
		}
	}
	sc.registered = true
	return nil
}

// store upserts every schedule's definition as seen at now.
func (sc *Scheduler) store(ctx context.Context, now time.Time) error {
	for _, e := range sc.entries {
		def := queue.ScheduleDef{Name: e.s.Name, Spec: e.spec.String(), TimeZone: e.spec.TimeZone(), Queue: e.s.Queue,
			NextTick: e.spec.Next(now), At: now}
		if err := sc.q.UpsertSchedule(ctx, def); err != nil {
			return err
		}
	}
	sc.refreshAt = now.Add(SeenInterval)
	return nil
}

// Step enqueues what is due now, once; Run calls it in a loop. Every
// SeenInterval it stores the definitions again. It returns an error only
// for the failures that end Run — except that a Step called before Run
// first stores the schedules, once, and returns any error doing so.
func (sc *Scheduler) Step(ctx context.Context) error {
	if !sc.registered {
		if err := sc.register(ctx); err != nil {
			return err
		}
	}
	now := sc.cfg.Clock.Now()
	if !now.Before(sc.refreshAt) {
		if err := sc.store(ctx, now); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if fatal(err) {
				return err
			}
			sc.cfg.Logger.Warn("dbq: schedule: storing the schedules again failed; retrying", "err", err)
			sc.refreshAt = now.Add(sc.backoff(0))
		}
	}
	for _, e := range sc.entries {
		if now.Before(e.retryAt) {
			continue
		}
		err := sc.fire(ctx, e, now)
		if err == nil {
			e.retries, e.retryAt = 0, time.Time{}
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		if fatal(err) {
			return err
		}
		sc.cfg.Hooks.TickFailed(e.s.Name, err)
		sc.cfg.Logger.Warn("dbq: schedule: recording a tick failed; retrying", "schedule", e.s.Name, "err", err)
		e.retryAt = now.Add(sc.backoff(e.retries))
		e.retries++
	}
	return nil
}

// wait is how long to sleep until the next tick or retry is due.
func (sc *Scheduler) wait() time.Duration {
	now := sc.cfg.Clock.Now()
	d := sc.cfg.MaxWait
	for _, e := range sc.entries {
		next := e.spec.Next(e.from)
		if !e.retryAt.IsZero() {
			next = e.retryAt
		}
		if !next.IsZero() {
			d = min(d, next.Sub(now))
		}
	}
	return max(d, 0)
}

// tickWriteTimeout bounds one tick's write (AdvanceSchedule), which is not
// cut short by the scheduler's context.
const tickWriteTimeout = 15 * time.Second

// fire enqueues the due ticks of e as its policy says.
func (sc *Scheduler) fire(ctx context.Context, e *entry, now time.Time) error {
	n := 1
	if e.s.Missed == MissedEach {
		n = e.s.MaxMissed
	}
	ticks, passed := e.spec.due(e.from, now, n)
	if len(ticks) == 0 {
		return nil
	}
	skipped := SkipMissed
	if e.s.Missed == MissedEach {
		skipped = SkipOverCap
	}
	if latest := ticks[len(ticks)-1]; e.s.Missed == MissedNone && now.Sub(latest) > sc.cfg.Grace {
		e.from = latest
		sc.skip(e.s.Name, skipped, passed)
		sc.skip(e.s.Name, SkipLate, 1)
		return nil
	}
	for _, tick := range ticks {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Once begun, a tick's write runs to its answer even if ctx ends
		// meanwhile (bounded by tickWriteTimeout): cut short, its commit
		// could land while the scheduler reports the tick as failed.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tickWriteTimeout)
		r, err := sc.q.AdvanceSchedule(wctx, queue.Tick{
			Schedule: e.s.Name, At: tick, Next: e.spec.Next(tick),
			Job: queue.NewJob{
				Queue: e.s.Queue, Kind: e.s.Kind, Payload: e.s.Payload, Priority: e.s.Priority, MaxAttempts: e.s.MaxAttempts,
				RunAt: tick, DedupeKey: DedupeKey(e.s.Name, tick),
			},
		})
		cancel()
		if err != nil {
			return err
		}
		e.from = tick
		switch {
		case !r.Advanced:
			sc.skip(e.s.Name, SkipTaken, 1)
		case r.Paused:
			sc.skip(e.s.Name, SkipPaused, 1)
		case r.Existed:
			sc.skip(e.s.Name, SkipDuplicate, 1)
		default:
			sc.cfg.Hooks.TickEnqueued(e.s.Name, tick, r.JobID)
		}
	}
	sc.skip(e.s.Name, skipped, passed)
	return nil
}

func (sc *Scheduler) skip(name string, why SkipReason, n int) {
	if n > 0 {
		sc.cfg.Hooks.TicksSkipped(name, why, n)
	}
}

// DedupeKey is the dedupe key of the job that schedule's tick makes:
// "schedule:NAME:TICK", the tick in UTC as RFC 3339.
func DedupeKey(schedule string, tick time.Time) string {
	return "schedule:" + schedule + ":" + tick.UTC().Format(time.RFC3339)
}
