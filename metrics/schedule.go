package metrics

import (
	"errors"
	"sync"
	"time"

	"github.com/dbqueue/dbq/schedule"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxSchedules is ScheduleHooks' default bound on schedule labels.
const DefaultMaxSchedules = 100

// OtherSchedules is the schedule label of every schedule past the bound.
const OtherSchedules = "_other"

// ScheduleHooks is a schedule.Hooks that counts ticks per schedule:
//
//	dbq_schedule_ticks_enqueued_total{schedule}          ticks this process enqueued a job for
//	dbq_schedule_ticks_skipped_total{schedule,reason}    ticks that made no job here, by
//	                                                     schedule.SkipReason: missed, late,
//	                                                     over_cap, taken, paused, duplicate
//	dbq_schedule_tick_errors_total{schedule}             failed attempts to record a tick
//	dbq_schedule_last_tick_timestamp_seconds{schedule}   the last tick this process enqueued
//
// Schedule names come from code or a crontab file, but a file can be long:
// the first MaxSchedules names get their own label, later ones share
// "_other", so the series stay bounded.
type ScheduleHooks struct {
	enqueued, skipped, errs *prometheus.CounterVec
	lastTick                *prometheus.GaugeVec
	max                     int

	mu    sync.Mutex
	names map[string]bool
}

var _ schedule.Hooks = (*ScheduleHooks)(nil)

// NewScheduleHooks makes the schedule metrics and registers them on reg
// (nil: prometheus.DefaultRegisterer), with at most maxSchedules schedule
// labels (0: DefaultMaxSchedules).
func NewScheduleHooks(reg prometheus.Registerer, maxSchedules int) (*ScheduleHooks, error) {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	if maxSchedules <= 0 {
		maxSchedules = DefaultMaxSchedules
	}
	h := &ScheduleHooks{
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dbq_schedule_ticks_enqueued_total",
			Help: "Schedule ticks this process enqueued a job for."}, []string{"schedule"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dbq_schedule_ticks_skipped_total",
			Help: "Schedule ticks that made no job here, by reason: missed, late, over_cap, taken, paused or duplicate."}, []string{"schedule", "reason"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dbq_schedule_tick_errors_total",
			Help: "Failed attempts to record a schedule tick (retried)."}, []string{"schedule"}),
		lastTick: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dbq_schedule_last_tick_timestamp_seconds",
			Help: "The last tick this process enqueued a job for, as a Unix time."}, []string{"schedule"}),
		max:   maxSchedules,
		names: map[string]bool{},
	}
	var errs []error
	for _, c := range []prometheus.Collector{h.enqueued, h.skipped, h.errs, h.lastTick} {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return h, nil
}

// label returns name's label value, creating its series at zero the first
// time so that rates exist from the start.
func (h *ScheduleHooks) label(name string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.names[name] {
		return name
	}
	if len(h.names) >= h.max {
		name = OtherSchedules
		if h.names[name] {
			return name
		}
	}
	h.names[name] = true
	h.enqueued.WithLabelValues(name)
	h.errs.WithLabelValues(name)
	for _, r := range schedule.SkipReasons() {
		h.skipped.WithLabelValues(name, string(r))
	}
	return name
}

// TickEnqueued counts an enqueued tick.
func (h *ScheduleHooks) TickEnqueued(name string, tick time.Time, _ int64) {
	l := h.label(name)
	h.enqueued.WithLabelValues(l).Inc()
	h.lastTick.WithLabelValues(l).Set(float64(tick.Unix()))
}

// TicksSkipped counts skipped ticks by reason.
func (h *ScheduleHooks) TicksSkipped(name string, reason schedule.SkipReason, n int) {
	h.skipped.WithLabelValues(h.label(name), string(reason)).Add(float64(n))
}

// TickFailed counts a failed attempt.
func (h *ScheduleHooks) TickFailed(name string, _ error) {
	h.errs.WithLabelValues(h.label(name)).Inc()
}
