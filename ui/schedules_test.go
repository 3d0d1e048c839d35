package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/memq"
	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/schedule"
	"github.com/dbqueue/dbq/ui"
)

// upsert stores a schedule as a scheduler would, now.
func (e *env) upsert(t *testing.T, name, spec, zone, queueName string, next time.Time) {
	t.Helper()
	e.upsertAt(t, name, spec, zone, queueName, next, time.Now())
}

// upsertAt stores a schedule as a scheduler would at the time at.
func (e *env) upsertAt(t *testing.T, name, spec, zone, queueName string, next, at time.Time) {
	t.Helper()
	def := queue.ScheduleDef{Name: name, Spec: spec, TimeZone: zone, Queue: queueName, NextTick: next, At: at}
	if err := e.q.UpsertSchedule(ctxT(t), def); err != nil {
		t.Fatal(err)
	}
}

// insertRawSchedule stores a schedule row with a plain INSERT, past the
// checks of UpsertSchedule, as a hand-edited table may hold.
func (e *env) insertRawSchedule(t *testing.T, name, spec, zone, queueName string) {
	t.Helper()
	table := e.names.Qualified(e.d, e.names.WithDefaults().Prefix+"schedules")
	var err error
	switch e.d {
	case dialect.Postgres:
		_, err = e.db.ExecContext(ctxT(t), "INSERT INTO "+table+" (name, spec, time_zone, queue) VALUES ($1, $2, $3, $4)",
			name, spec, zone, queueName)
	case dialect.SQLite:
		_, err = e.db.ExecContext(ctxT(t), "INSERT INTO "+table+" (name, spec, time_zone, queue, updated_at) VALUES (?, ?, ?, ?, ?)",
			name, spec, zone, queueName, time.Now().UnixMicro())
	default:
		_, err = e.db.ExecContext(ctxT(t), "INSERT INTO "+table+" (name, spec, time_zone, queue, updated_at) VALUES (?, ?, ?, ?, ?)",
			name, spec, zone, queueName, time.Now().UTC())
	}
	if err != nil {
		t.Fatal(err)
	}
}

// scheduleRow returns the text of the Schedules page's row of name, as
// queueRow does for queues.
func scheduleRow(body, name string) string {
	return queueRow(strings.ReplaceAll(body, `<tr data-schedule="`+name+`">`, `<tr data-queue="`+name+`">`), name)
}

func TestSchedulesPageListsSchedules(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		now := time.Now()
		berlin, err := schedule.Parse("0 3 * * *", "Europe/Berlin")
		if err != nil {
			t.Fatal(err)
		}
		e.upsert(t, "nightly", "0 3 * * *", "Europe/Berlin", "reports", berlin.Next(now))
		// No scheduler for an hour; the stale next tick is off the 30s grid,
		// so it never reads as the same second as the last tick.
		stale := now.Add(-time.Hour).Truncate(30 * time.Second).Add(-15 * time.Second)
		e.upsert(t, "often", "@every 30s", "UTC", "ticks", stale)
		tick := stale.Truncate(30 * time.Second)
		res, err := e.q.AdvanceSchedule(ctxT(t), queue.Tick{Schedule: "often", At: tick, Next: tick.Add(30 * time.Second),
			Job: queue.NewJob{Queue: "ticks", DedupeKey: schedule.DedupeKey("often", tick)}})
		if err != nil || !res.Advanced {
			t.Fatalf("AdvanceSchedule: %+v, %v", res, err)
		}
		if err := e.q.PauseSchedule(ctxT(t), "often"); err != nil {
			t.Fatal(err)
		}
		// Stored by a scheduler two hours ago and not since: stale.
		e.upsertAt(t, "gone", "@hourly", "UTC", "ticks", now.Add(-time.Hour), now.Add(-2*time.Hour))
		b := e.serve(t, ui.Options{})
		body := b.page("/schedules")
		if !strings.Contains(body, `<a href="/schedules" aria-current="page">Schedules</a>`) {
			t.Errorf("Schedules page: no current nav link")
		}
		next := berlin.Next(time.Now()).Format("2006-01-02 15:04:05 MST")
		for name, want := range map[string]string{
			"nightly": `^nightly 0 3 \* \* \* Europe/Berlin reports never ` + regexp.QuoteMeta(next) + ` \(in \S+\) \S+ ago running Pause Delete$`,
			// Seen now, but its stored next tick passed an hour ago.
			"often": `^often @every 30s UTC ticks ` + regexp.QuoteMeta(tick.UTC().Format("2006-01-02 15:04:05 UTC")) +
				` \(1h\S+ ago\) \d{4}-\S+ \S+ UTC \(in \S+\) \S+ ago paused late Resume Delete$`,
			"gone": `^gone @hourly UTC ticks never \d{4}-\S+ \S+ UTC \(in \S+\) 2h\S+ ago running stale Pause Delete$`,
		} {
			if got := scheduleRow(body, name); !regexp.MustCompile(want).MatchString(got) {
				t.Errorf("row of %s: %q, want %s", name, got, want)
			}
		}
		// The next tick is the spec's, not the stale stored one.
		if got := scheduleRow(body, "often"); strings.Contains(got, stale.UTC().Format("15:04:05 UTC (")) {
			t.Errorf("row of often shows the stored next tick: %q", got)
		}
	})
}

func TestScheduleActionsPauseAndResume(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		e.upsert(t, "daily", "@daily", "UTC", "d", time.Now().Add(time.Hour))
		b := e.serve(t, ui.Options{})
		tok := b.token("/schedules")
		paused := func() bool {
			t.Helper()
			list, err := e.q.Schedules(ctxT(t))
			if err != nil || len(list) != 1 {
				t.Fatalf("schedules: %+v, %v", list, err)
			}
			return list[0].Paused
		}
		code, loc := b.post("/schedules/pause", url.Values{"csrf": {tok}, "name": {"daily"}})
		if code != http.StatusSeeOther || loc != "/schedules" || !paused() {
			t.Fatalf("pause: %d to %q, paused %v", code, loc, paused())
		}
		body := b.page(loc)
		if !strings.Contains(body, `<p class="flash" role="status">Schedule daily is paused: its ticks pass without a job.</p>`) ||
			!strings.HasSuffix(scheduleRow(body, "daily"), "paused Resume Delete") {
			t.Errorf("after pause: row %q", scheduleRow(body, "daily"))
		}
		if code, _ := b.post("/schedules/resume", url.Values{"csrf": {tok}, "name": {"daily"}}); code != http.StatusSeeOther || paused() {
			t.Fatalf("resume: %d, paused %v", code, paused())
		}
		for name, want := range map[string]int{"nosuch": http.StatusNotFound, "bad name!": http.StatusBadRequest, "": http.StatusBadRequest} {
			if code, _ := b.post("/schedules/pause", url.Values{"csrf": {tok}, "name": {name}}); code != want {
				t.Errorf("pause of %q: %d, want %d", name, code, want)
			}
			if code, _ := b.post("/schedules/delete", url.Values{"csrf": {tok}, "name": {name}}); code != want {
				t.Errorf("delete of %q: %d, want %d", name, code, want)
			}
		}
		code, loc = b.post("/schedules/delete", url.Values{"csrf": {tok}, "name": {"daily"}})
		if list, err := e.q.Schedules(ctxT(t)); code != http.StatusSeeOther || loc != "/schedules" || err != nil || len(list) != 0 {
			t.Fatalf("delete: %d to %q; left %+v, %v", code, loc, list, err)
		}
		if body := b.page(loc); !strings.Contains(body, `<p class="flash" role="status">Schedule daily is deleted.`) ||
			strings.Contains(body, `data-schedule="daily"`) {
			t.Errorf("after delete: %s", body)
		}
	})
}

func TestScheduleActionsRefusedWithoutTokenOrWhenReadOnly(t *testing.T) {
	eachDB(t, func(t *testing.T, e *env) {
		e.upsert(t, "s", "@hourly", "UTC", "q", time.Now().Add(time.Hour))
		secret := []byte("one secret for both handlers, 32+")
		b := e.serve(t, ui.Options{CSRFSecret: secret})
		tok := b.token("/schedules")
		ro := e.serve(t, ui.Options{ReadOnly: true, CSRFSecret: secret})
		ro.c = b.c // same cookies: the token is valid there too
		for name, try := range map[string]func() (int, string){
			"no token": func() (int, string) { return b.post("/schedules/pause", url.Values{"name": {"s"}}) },
			"wrong token": func() (int, string) {
				return b.post("/schedules/pause", url.Values{"name": {"s"}, "csrf": {tok + "x"}})
			},
			"cross-site": func() (int, string) {
				return b.post("/schedules/pause", url.Values{"name": {"s"}, "csrf": {tok}}, "Sec-Fetch-Site", "cross-site")
			},
			"read-only":         func() (int, string) { return ro.post("/schedules/pause", url.Values{"name": {"s"}, "csrf": {tok}}) },
			"read-only, resume": func() (int, string) { return ro.post("/schedules/resume", url.Values{"name": {"s"}, "csrf": {tok}}) },
			"delete, no token":  func() (int, string) { return b.post("/schedules/delete", url.Values{"name": {"s"}}) },
			"delete, cross-site": func() (int, string) {
				return b.post("/schedules/delete", url.Values{"name": {"s"}, "csrf": {tok}}, "Sec-Fetch-Site", "cross-site")
			},
			"read-only, delete": func() (int, string) { return ro.post("/schedules/delete", url.Values{"name": {"s"}, "csrf": {tok}}) },
		} {
			if code, _ := try(); code != http.StatusForbidden {
				t.Errorf("%s: %d, want 403", name, code)
			}
		}
		if list, err := e.q.Schedules(ctxT(t)); err != nil || len(list) != 1 || list[0].Paused {
			t.Errorf("after refused pauses: %+v, %v", list, err)
		}
		if body := ro.page("/schedules"); strings.Contains(body, `<form method="post"`) || !strings.Contains(body, `<tr data-schedule="s">`) {
			t.Errorf("read-only Schedules page shows an action, or not the schedule")
		}
	})
}

func TestHostileScheduleIsEscaped(t *testing.T) {
	const evil = `<script>alert("x")</script><img src=x onerror=alert(1)>`
	eachDB(t, func(t *testing.T, e *env) {
		e.insertRawSchedule(t, evil, evil, evil, evil)
		b := e.serve(t, ui.Options{})
		body := withoutOwnScript(b.page("/schedules"))
		if strings.Contains(body, "<script") || strings.Contains(body, "<img") {
			t.Errorf("hostile schedule rendered as markup:\n%s", body)
		}
		if n := strings.Count(body, "&lt;script&gt;alert("); n < 4 {
			t.Errorf("hostile schedule shown escaped %d times, want name, spec, zone and queue", n)
		}
		if !strings.Contains(body, "cannot parse: dbq: invalid schedule spec") {
			t.Errorf("a spec that does not parse is not said so")
		}
		tok := b.token("/schedules")
		if code, _ := b.post("/schedules/pause", url.Values{"csrf": {tok}, "name": {evil}}); code != http.StatusBadRequest {
			t.Errorf("pause of a hostile name: %d, want 400", code)
		}
	})
}

// noScheduleStore is memq without schedules, as a third-party driver
// that stores none answers: ErrUnsupported from each ScheduleStore method.
type noScheduleStore struct{ queue.Driver }

var errNoSchedules = fmt.Errorf("%w: no schedules here", queue.ErrUnsupported)

func (noScheduleStore) UpsertSchedule(context.Context, queue.ScheduleDef) error {
	return errNoSchedules
}
func (noScheduleStore) AdvanceSchedule(context.Context, queue.Tick) (queue.TickResult, error) {
	return queue.TickResult{}, errNoSchedules
}
func (noScheduleStore) Schedules(context.Context) ([]queue.ScheduleInfo, error) {
	return nil, errNoSchedules
}
func (noScheduleStore) SetSchedulePaused(context.Context, string, bool) error { return errNoSchedules }
func (noScheduleStore) DeleteSchedule(context.Context, string, time.Time) error {
	return errNoSchedules
}

func TestSchedulesPageWithoutScheduleStore(t *testing.T) {
	store := memq.New(time.Minute)
	drv := store.Driver()
	q, err := queue.New(noScheduleStore{drv}, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctxT(t), queue.NewJob{Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	b := (&env{q: q}).serve(t, ui.Options{})
	body := b.page("/schedules")
	if !strings.Contains(body, `<p class="empty" id="unsupported">The memory driver keeps no schedules.</p>`) {
		t.Errorf("Schedules page without a store:\n%s", body)
	}
	tok := b.token("/") // the Queues page has a form: Pause q
	if code, _ := b.post("/schedules/pause", url.Values{"csrf": {tok}, "name": {"s"}}); code != http.StatusNotImplemented {
		t.Errorf("pause without a store: %d, want 501", code)
	}

	// A store whose table is missing.
	q, err = queue.New(drv, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	store.SetMigrated(false)
	body = (&env{q: q}).serve(t, ui.Options{}).page("/schedules")
	if !strings.Contains(body, "The schedules table does not exist: run `dbq migrate up`.") {
		t.Errorf("Schedules page without the table:\n%s", body)
	}
}
