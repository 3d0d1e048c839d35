package bench

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Plot draws drain throughput against worker count, one line per
// implementation and strategy (the floor included), to file; the
// extension picks the format (.png, .svg, .pdf). Another library's tuned
// row (Case TunedCase: one configuration, not a worker count) is a
// dotted level line across the plot, the fastest where it ran more than
// once. Rows of a batch other than the default are series of their own.
func Plot(file string, rows []Row) error {
	pd := drainSeries(rows)
	names, series, dialects, workerSet, tuned := pd.names, pd.series, pd.dialects, pd.workers, pd.tuned
	if len(names) == 0 {
		return fmt.Errorf("bench: no drain rows to plot")
	}
	p := plot.New()
	p.Title.Text = "Drain throughput"
	for d := range dialects {
		p.Title.Text += " · " + d
	}
	p.X.Label.Text = "workers (connections)"
	p.Y.Label.Text = "jobs/s"
	p.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	for w := range workerSet {
		ticks = append(ticks, plot.Tick{Value: float64(w), Label: fmt.Sprint(w)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	for i, name := range names {
		xy := series[name]
		slices.SortFunc(xy, func(a, b plotter.XY) int { return int(a.X - b.X) })
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		pts.Color = plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		if strings.HasPrefix(name, "floor") {
			// The floor is black, the floor of another batch grey.
			var c color.Color = color.Black
			if name != "floor" {
				c = color.Gray{Y: 0x80}
			}
			l.Color, pts.Color = c, c
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l, pts)
		p.Legend.Add(name, l, pts)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for w := range workerSet {
		lo, hi = min(lo, float64(w)), max(hi, float64(w))
	}
	for i, r := range tuned {
		l, err := plotter.NewLine(plotter.XYs{{X: lo, Y: r.PerSec}, {X: hi, Y: r.PerSec}})
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(len(names) + i)
		l.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(r.Impl+" tuned (its own benchmark's settings)", l)
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, file)
}

// plotData is what Plot draws: a line per name, the dialects in the
// title, the worker counts on the x axis, a level per tuned row.
type plotData struct {
	names    []string
	series   map[string]plotter.XYs
	dialects map[string]bool
	workers  map[int]bool
	tuned    []Row // the fastest tuned row of each library
}

// drainSeries sorts the drain rows into Plot's lines.
func drainSeries(rows []Row) plotData {
	series := map[string]plotter.XYs{}
	var names []string
	dialects := map[string]bool{}
	workerSet := map[int]bool{}
	var tuned []Row
	for _, r := range rows {
		if r.Section == Drain && r.PerSec > 0 && r.Case == TunedCase {
			i := slices.IndexFunc(tuned, func(t Row) bool { return t.Impl == r.Impl })
			switch {
			case i < 0:
				tuned = append(tuned, r)
			case r.PerSec > tuned[i].PerSec:
				tuned[i] = r
			}
			continue
		}
		if r.Section != Drain || r.PerSec <= 0 || r.Workers <= 0 {
			continue
		}
		dialects[r.Dialect] = true
		workerSet[r.Workers] = true
		// Another library's Strategy is a sentence of its settings: the
		// legend keeps its first clause, the table has it all.
		name := r.Impl
		if first, _, _ := strings.Cut(r.Strategy, ","); r.Impl != "dbq" && first != "" {
			name += " (" + first + ")"
		} else if r.Strategy != "" {
			name += " " + r.Strategy
		}
		if r.Batch != 0 && r.Batch != defaultDrainBatch {
			name += fmt.Sprintf(" batch=%d", r.Batch)
		}
		if _, ok := series[name]; !ok {
			names = append(names, name)
		}
		series[name] = append(series[name], plotter.XY{X: float64(r.Workers), Y: r.PerSec})
	}
	return plotData{names: names, series: series, dialects: dialects, workers: workerSet, tuned: tuned}
}
