package main

import (
	"fmt"
	"image/color"
	"os"
	"slices"

	"github.com/dbqueue/dbq/bench/soak"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// panel is one chart of a scenario's figure: a value of a row over time.
type panel struct {
	title, unit string
	value       func(soak.Row) float64
}

var panels = []panel{
	{"drained", "jobs/s", func(r soak.Row) float64 { return r.Drained }},
	{"backlog", "jobs", func(r soak.Row) float64 { return float64(r.Backlog) }},
	{"claim p99", "ms", func(r soak.Row) float64 { return r.ClaimP99ms }},
	{"dead tuples", "n_dead_tup", func(r soak.Row) float64 { return float64(r.DeadTup) }},
	{"table + indexes", "MB", func(r soak.Row) float64 { return float64(r.TableBytes+r.IndexBytes) / (1 << 20) }},
	{"oldest snapshot", "xmin age (transactions)", func(r soak.Row) float64 { return float64(r.XminAge) }},
}

// plotScenarios draws one PNG per scenario, prefix-<scenario>.png: a
// panel per measure against time, a line per target, the offered rate
// dashed in black on the drained panel. It returns the files it wrote.
func plotScenarios(prefix string, rows []soak.Row) ([]string, error) {
	var scenarios []string
	for _, r := range rows {
		if r.Err == "" && !slices.Contains(scenarios, r.Scenario) {
			scenarios = append(scenarios, r.Scenario)
		}
	}
	if len(scenarios) == 0 {
		return nil, fmt.Errorf("dbqsoak: no rows to plot")
	}
	var made []string
	for _, sc := range scenarios {
		file := fmt.Sprintf("%s-%s.png", prefix, sc)
		if err := plotScenario(file, sc, rows); err != nil {
			return made, err
		}
		made = append(made, file)
	}
	return made, nil
}

func plotScenario(file, scenario string, rows []soak.Row) error {
	var labels []string
	byLabel := map[string][]soak.Row{}
	for _, r := range rows {
		if r.Scenario != scenario || r.Err != "" {
			continue
		}
		if _, ok := byLabel[r.Label()]; !ok {
			labels = append(labels, r.Label())
		}
		byLabel[r.Label()] = append(byLabel[r.Label()], r)
	}
	const cols = 2
	rowsN := (len(panels) + cols - 1) / cols
	plots := make([][]*plot.Plot, rowsN)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = scenario + ": " + pn.title
		p.X.Label.Text = "s"
		p.Y.Label.Text = pn.unit
		p.X.Min, p.Y.Min = 0, 0
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		for j, label := range labels {
			if err := addLine(p, label, byLabel[label], pn.value, plotutil.Color(j), nil); err != nil {
				return err
			}
		}
		if i == 0 && len(labels) > 0 {
			dashes := []vg.Length{vg.Points(4), vg.Points(3)}
			offered := func(r soak.Row) float64 { return r.Offered }
			if err := addLine(p, "offered ("+labels[0]+")", byLabel[labels[0]], offered, color.Black, dashes); err != nil {
				return err
			}
		}
		plots[i/cols][i%cols] = p
	}
	img := vgimg.New(12*vg.Inch, vg.Length(rowsN)*3.5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rowsN, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j, p := range plots[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	return savePNG(file, img)
}

func addLine(p *plot.Plot, label string, rows []soak.Row, value func(soak.Row) float64, c color.Color, dashes []vg.Length) error {
	xy := make(plotter.XYs, len(rows))
	for i, r := range rows {
		xy[i] = plotter.XY{X: r.T, Y: value(r)}
	}
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.Color, l.Dashes = c, dashes
	p.Add(l)
	p.Legend.Add(label, l)
	return nil
}

func savePNG(file string, img *vgimg.Canvas) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
