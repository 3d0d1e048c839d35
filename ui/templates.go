package ui

import (
	"fmt"
	"html/template"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// pages are the templates, each parsed with layout.html.
var pages = []string{"queues", "jobs", "job", "missing", "schedules", "workers"}

func (h *handler) parse() error {
	funcs := template.FuncMap{
		"since":    since,
		"utc":      func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"rel":      rel,
		"zoned":    zoned,
		"state":    shownState,
		"jobsURL":  h.jobsURL,
		"count":    count,
		"kindURL":  h.kindURL,
		"isZero":   func(t time.Time) bool { return t.IsZero() },
		"canRetry": func(j *queue.Job) bool { return j.State == queue.StateDead },
		"canCancel": func(j *queue.Job) bool {
			return j.State != queue.StateClaimed
		},
	}
	h.tmpl = map[string]*template.Template{}
	for _, name := range pages {
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("dbq: ui: templates: %w", err)
		}
		h.tmpl[name] = t
	}
	return nil
}

// jobsURL links to the Jobs page filtered by queue and state.
func (h *handler) jobsURL(queueName, state string) string {
	return h.pageURL(queue.JobFilter{Queue: queueName, State: queue.State(state)}, 0, nil)
}

// kindURL links to the Jobs page filtered by queue and kind.
func (h *handler) kindURL(queueName, kind string) string {
	return h.pageURL(queue.JobFilter{Queue: queueName, Kind: kind}, 0, nil)
}

// pageURL links to the page of jobs after id that match f's queue, state
// and kind, with the cursors of the pages before it (at most maxBack, the
// latest).
func (h *handler) pageURL(f queue.JobFilter, after int64, back []int64) string {
	v := url.Values{}
	if after > 0 {
		v.Set("after", strconv.FormatInt(after, 10))
	}
	if len(back) > maxBack {
		back = back[len(back)-maxBack:]
	}
	if len(back) > 0 {
		s := make([]string, len(back))
		for i, id := range back {
			s[i] = strconv.FormatInt(id, 10)
		}
		v.Set("back", strings.Join(s, ","))
	}
	if f.Queue != "" {
		v.Set("queue", f.Queue)
	}
	if f.DedupeKey != "" {
		v.Set("key", f.DedupeKey)
	}
	if f.State != "" {
		v.Set("state", string(f.State))
	}
	if f.Kind != "" {
		v.Set("kind", f.Kind)
	}
	if len(v) == 0 {
		return h.opts.Prefix + "/jobs"
	}
	return h.opts.Prefix + "/jobs?" + v.Encode()
}

// shownState is a job's state as the pages name it: a ready job whose
// run_at is ahead is scheduled, a claimed one is held.
func shownState(j *queue.Job, now time.Time) string {
	switch {
	case j.State == queue.StateReady && j.RunAt.After(now):
		return "scheduled"
	case j.State == queue.StateClaimed:
		return "held"
	}
	return string(j.State)
}

// zoned formats t in the IANA time zone tz, or in UTC when tz is unknown.
func zoned(t time.Time, tz string) string {
	if loc, err := time.LoadLocation(tz); err == nil && tz != "" && tz != "Local" {
		t = t.In(loc)
	} else {
		t = t.UTC()
	}
	return t.Format("2006-01-02 15:04:05 MST")
}

// since formats a wait in seconds, as QueueStats.OldestReadyAge gives it.
func since(seconds float64) string {
	if seconds <= 0 || math.IsNaN(seconds) {
		return "0s"
	}
	return short(time.Duration(seconds * float64(time.Second)))
}

// rel says how far t is from now: "in 5m", "3h ago".
func rel(t, now time.Time) string {
	d := t.Sub(now)
	if d >= 0 {
		return "in " + short(d)
	}
	return short(-d) + " ago"
}

func short(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < 48*time.Hour:
		return d.Round(time.Second).String()
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// count shows n, a count that stopped at limit, as "limit+" when it did.
func count(n, limit int64) string {
	if n >= limit {
		return strconv.FormatInt(limit, 10) + "+"
	}
	return strconv.FormatInt(n, 10)
}
