package ui

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// chartMinutes is the span of the Queues page's charts: the last hour, a
// point per minute, the current (partial) minute last.
const chartMinutes = 60

// Chart geometry, in the SVG's own units: chartStep per minute across,
// chartHeight up. CSS sizes the SVG; strokes keep their width
// (vector-effect in style.css).
const (
	chartStep   = 2
	chartHeight = 30
	chartWidth  = chartStep * (chartMinutes - 1)
)

// chart is one queue's completed, retried and dead jobs per minute over
// the last hour, as SVG polyline points ("x,y x,y …": numbers only).
type chart struct {
	Completed, Retried, Dead string
	// Totals of the hour and the busiest minute's count of any series.
	TotalCompleted, TotalRetried, TotalDead int64
	Peak                                    int64
}

// Width and Height are the SVG's viewBox size.
func (chart) Width() int  { return chartWidth }
func (chart) Height() int { return chartHeight }

// Label describes the chart for screen readers and as a tooltip.
func (c *chart) Label() string {
	return fmt.Sprintf("Last hour: %d completed, %d retried, %d dead; busiest minute %d jobs",
		c.TotalCompleted, c.TotalRetried, c.TotalDead, c.Peak)
}

// charts builds each queue's chart from the counts Queue.Activity gave for
// the hour ending in the minute of now.
func charts(counts []queue.ActivityCount, now time.Time) map[string]*chart {
	first := now.UTC().Truncate(time.Minute).Add(-(chartMinutes - 1) * time.Minute)
	type series [3][chartMinutes]int64
	byQueue := map[string]*series{}
	for _, c := range counts {
		i := int(c.Minute.Sub(first) / time.Minute)
		if i < 0 || i >= chartMinutes {
			continue
		}
		s := byQueue[c.Queue]
		if s == nil {
			s = &series{}
			byQueue[c.Queue] = s
		}
		s[0][i] += c.Completed
		s[1][i] += c.Retried
		s[2][i] += c.Dead
	}
	out := make(map[string]*chart, len(byQueue))
	for name, s := range byQueue {
		c := &chart{}
		for k := range s {
			for _, v := range s[k] {
				c.Peak = max(c.Peak, v)
			}
		}
		totals := [3]*int64{&c.TotalCompleted, &c.TotalRetried, &c.TotalDead}
		points := [3]*string{&c.Completed, &c.Retried, &c.Dead}
		for k := range s {
			var b strings.Builder
			for i, v := range s[k] {
				*totals[k] += v
				if i > 0 {
					b.WriteByte(' ')
				}
				// Up from the bottom, the peak at the top; 0.5 keeps a
				// zero line inside the box.
				y := chartHeight - 0.5 - float64(v)*(chartHeight-1)/float64(max(c.Peak, 1))
				b.WriteString(strconv.Itoa(i * chartStep))
				b.WriteByte(',')
				b.WriteString(strconv.FormatFloat(y, 'f', 1, 64))
			}
			*points[k] = b.String()
		}
		out[name] = c
	}
	return out
}

// activityNote says why the Queues page has no charts, or the Workers page
// no processes: "" when the driver keeps activity.
func (h *handler) activityNote(err error) (string, error) {
	switch {
	case errors.Is(err, queue.ErrUnsupported):
		return fmt.Sprintf("The %s driver keeps no worker activity.", h.q.Dialect()), nil
	case errors.Is(err, queue.ErrNotMigrated):
		return "The activity tables do not exist: run `dbq migrate up`.", nil
	}
	return "", err
}

// workerRow is one process as the Workers page shows it.
type workerRow struct {
	queue.ProcessInfo
	Gone bool
}

// workersPage is the data of the Workers page.
type workersPage struct {
	Workers     []workerRow
	Running     int
	Unsupported string
	Now         time.Time
}

func (h *handler) workers(w http.ResponseWriter, r *http.Request) {
	p := workersPage{Now: time.Now()}
	list, err := h.q.Processes(r.Context())
	if p.Unsupported, err = h.activityNote(err); err != nil {
		h.fail(w, r, err)
		return
	}
	for _, pr := range list {
		row := workerRow{ProcessInfo: pr, Gone: pr.Gone(p.Now)}
		if !row.Gone {
			p.Running++
		}
		p.Workers = append(p.Workers, row)
	}
	h.render(w, r, "workers", "Workers", p)
}
