package ui

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/schedule"
)

// lateAfter is how far past its stored next tick a schedule must be before
// the Schedules page says that its ticks are not being recorded:
// schedulers record each tick within moments of it.
const lateAfter = 2 * time.Minute

// scheduleRow is one schedule as the Schedules page shows it.
type scheduleRow struct {
	queue.ScheduleInfo
	// Next is the next tick after now by the spec, or the stored next tick
	// when the spec does not parse (SpecErr says why).
	Next    time.Time
	SpecErr string
	// Stale: no scheduler has stored the schedule for schedule.StaleAfter,
	// so no running scheduler defines it (schedule.Stale).
	Stale bool
	// Late: a scheduler still stores it, but its stored next tick passed
	// lateAfter ago without one recording the tick.
	Late bool
}

// schedulesPage is the data of the Schedules page.
type schedulesPage struct {
	Schedules []scheduleRow
	// Unsupported says why there are no schedules to show: the driver
	// keeps none, or their table is missing. "" otherwise.
	Unsupported string
	Now         time.Time
	// StaleAfter and SeenInterval are schedule's, for the page's note.
	StaleAfter, SeenInterval time.Duration
}

func (h *handler) schedules(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	p := schedulesPage{Now: now, StaleAfter: schedule.StaleAfter, SeenInterval: schedule.SeenInterval}
	list, err := h.q.Schedules(r.Context())
	switch {
	case errors.Is(err, queue.ErrUnsupported):
		p.Unsupported = fmt.Sprintf("The %s driver keeps no schedules.", h.q.Dialect())
	case errors.Is(err, queue.ErrNotMigrated):
		p.Unsupported = "The schedules table does not exist: run `dbq migrate up`."
	case err != nil:
		h.fail(w, r, err)
		return
	}
	for _, s := range list {
		row := scheduleRow{ScheduleInfo: s, Next: s.NextTick}
		if spec, err := schedule.Parse(s.Spec, s.TimeZone); err != nil {
			row.SpecErr = err.Error()
		} else {
			row.Next = spec.Next(now)
		}
		row.Stale = schedule.Stale(s, now)
		row.Late = !row.Stale && !s.NextTick.IsZero() && now.Sub(s.NextTick) > lateAfter
		p.Schedules = append(p.Schedules, row)
	}
	h.render(w, r, "schedules", "Schedules", p)
}

func (h *handler) pauseSchedule(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PostFormValue("name")
		set, msg := h.q.ResumeSchedule, "Schedule %s is running again: its next tick enqueues a job."
		if paused {
			set, msg = h.q.PauseSchedule, "Schedule %s is paused: its ticks pass without a job."
		}
		if err := set(r.Context(), name); err != nil {
			h.fail(w, r, err)
			return
		}
		h.backTo(w, r, "/schedules", fmt.Sprintf(msg, name))
	}
}

// deleteSchedule removes a stored schedule (POST /schedules/delete).
func (h *handler) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	name := r.PostFormValue("name")
	if err := h.q.DeleteSchedule(r.Context(), name); err != nil {
		h.fail(w, r, err)
		return
	}
	h.backTo(w, r, "/schedules", fmt.Sprintf("Schedule %s is deleted. A scheduler that still defines it stores it again within %v.", name, schedule.SeenInterval))
}
