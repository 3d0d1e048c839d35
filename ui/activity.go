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
	chartHeight = 12
	chartWidth  = chartStep * (chartMinutes - 1)
)

// chart is one queue's completed, retried and dead jobs per minute over
// the last hour: three small charts, one above the other, each on its own
// scale (its busiest minute at the top), so that a few dead jobs among
// thousands completed still show as a line, not as the floor.
type chart struct {
	Series [3]series
}

// series is one line of a chart, as SVG polyline points ("x,y x,y …":
// numbers only), with the hour's total and the busiest minute's count.
type series struct {
	Class, Name string
	Points      string
	Total, Peak int64
}

// Width and Height are the SVG's viewBox size.
func (series) Width() int  { return chartWidth }
func (series) Height() int { return chartHeight }

// Label describes the chart for screen readers and as a tooltip.
func (c *chart) Label() string {
	var b strings.Builder
	b.WriteString("Last hour:")
	for i, s := range c.Series {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " %d %s (busiest minute %d)", s.Total, s.Name, s.Peak)
	}
	return b.String()
}

// charts builds each queue's chart from the counts Queue.Activity gave for
// the hour ending in the minute of now.
func charts(counts []queue.ActivityCount, now time.Time) map[string]*chart {
	first := now.UTC().Truncate(time.Minute).Add(-(chartMinutes - 1) * time.Minute)
	type values [3][chartMinutes]int64
	byQueue := map[string]*values{}
	for _, c := range counts {
		i := int(c.Minute.Sub(first) / time.Minute)
		if i < 0 || i >= chartMinutes {
			continue
		}
		v := byQueue[c.Queue]
		if v == nil {
			v = &values{}
			byQueue[c.Queue] = v
		}
		v[0][i] += c.Completed
		v[1][i] += c.Retried
		v[2][i] += c.Dead
	}
	out := make(map[string]*chart, len(byQueue))
	for name, v := range byQueue {
		c := &chart{Series: [3]series{{Class: "completed", Name: "completed"}, {Class: "retried", Name: "retried"},
			{Class: "dead", Name: "dead"}}}
		for k := range v {
			s := &c.Series[k]
			for _, n := range v[k] {
				s.Peak = max(s.Peak, n)
				s.Total += n
			}
			var b strings.Builder
			for i, n := range v[k] {
				if i > 0 {
					b.WriteByte(' ')
				}
				// Up from the bottom, the series' peak at the top; 0.5
				// keeps a zero line inside the box.
				y := chartHeight - 0.5 - float64(n)*(chartHeight-1)/float64(max(s.Peak, 1))
				b.WriteString(strconv.Itoa(i * chartStep))
				b.WriteByte(',')
				b.WriteString(strconv.FormatFloat(y, 'f', 1, 64))
			}
			s.Points = b.String()
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
