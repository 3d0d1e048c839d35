package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestTableShowsShareOfFloor(t *testing.T) {
	t.Parallel()
	rows := []Row{
		{Dialect: "postgres", Section: Drain, Impl: "floor", Case: "workers=4", Workers: 4, PerSec: 1000},
		{Dialect: "postgres", Section: Drain, Impl: "dbq", Strategy: "skiplocked", Case: "workers=4", Workers: 4, PerSec: 250},
		{Dialect: "postgres", Section: Depth, Impl: "dbq", Case: "ready=10", P50ms: 1.5, P99ms: 3},
	}
	river := []Row{
		{Dialect: "postgres", Section: Drain, Impl: "river", Strategy: "workers=clients, MaxWorkers 100 each", Case: "workers=4", Workers: 4, PerSec: 200},
		{Dialect: "postgres", Section: Drain, Impl: "river", Strategy: "1 client, MaxWorkers 2000", Case: TunedCase, PerSec: 125},
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, rows); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&js)
	if err != nil || len(back) != len(rows) || back[1] != rows[1] {
		t.Fatalf("JSON round trip: %+v, %v", back, err)
	}
	var out strings.Builder
	if err := WriteTable(&out, back); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"25%", "1.50", "skiplocked"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	file := filepath.Join(t.TempDir(), "drain.png")
	if err := Plot(file, back); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
		t.Fatalf("plot: %v", err)
	}
	if err := Plot(file, back[2:]); err == nil {
		t.Error("Plot without drain rows: no error")
	}
	if err := Plot(file, append(back, river...)); err != nil {
		t.Errorf("Plot with River's tuned row: %v", err)
	}
}

// The ratio compares dbq's best drain with River's tuned row, though a
// per-worker-count River row is faster, and names both sides' settings.
func TestRatioUsesTunedRow(t *testing.T) {
	t.Parallel()
	rows := []Row{
		{Dialect: "postgres", Section: Drain, Impl: "dbq", Strategy: "advisory", Case: "workers=1", Workers: 1, PerSec: 100},
		{Dialect: "postgres", Section: Drain, Impl: "dbq", Strategy: "advisory", Case: "workers=4", Workers: 4, PerSec: 250},
		{Dialect: "postgres", Section: Drain, Impl: "river", Strategy: "workers=clients, MaxWorkers 100 each", Case: "workers=4", Workers: 4, PerSec: 200},
		{Dialect: "postgres", Section: Drain, Impl: "river", Strategy: "1 client, MaxWorkers 2000", Case: TunedCase, PerSec: 125},
	}
	var out strings.Builder
	WriteRatios(&out, rows)
	for _, want := range []string{"dbq advisory 250 jobs/s", "workers=4", "Concurrency 100", "= 2.00× river 125 jobs/s", "1 client, MaxWorkers 2000"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in %q", want, out.String())
		}
	}
}

// The ratio line names the batch and concurrency of the dbq row it uses.
func TestRatioNamesDrainBatch(t *testing.T) {
	t.Parallel()
	rows := []Row{
		{Dialect: "postgres", Section: Drain, Impl: "dbq", Strategy: "advisory", Case: "workers=4", Workers: 4, PerSec: 250, Batch: 100, Concurrency: 100},
		{Dialect: "postgres", Section: Drain, Impl: "dbq", Strategy: "advisory", Case: "workers=2 batch=1000", Workers: 2, PerSec: 500, Batch: 1000, Concurrency: 1000},
		{Dialect: "postgres", Section: Drain, Impl: "river", Case: TunedCase, PerSec: 125},
	}
	var out strings.Builder
	WriteRatios(&out, rows)
	for _, want := range []string{"dbq advisory 500 jobs/s", "workers=2 batch=1000", "Concurrency 1000, BatchSize 1000", "= 4.00×"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in %q", want, out.String())
		}
	}
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	lat := make([]time.Duration, 100)
	for i := range lat {
		lat[i] = time.Duration(100-i) * time.Millisecond
	}
	r := latencyRow(Row{}, lat)
	if r.P50ms != 50 || r.P99ms != 99 || r.Jobs != 100 {
		t.Errorf("p50 %v p99 %v jobs %d, want 50, 99, 100", r.P50ms, r.P99ms, r.Jobs)
	}
}

// The plot draws a batch other than the default as a line of its own, and
// the faster of two tuned rows of a library that ran twice.
func TestPlotSeries(t *testing.T) {
	t.Parallel()
	var rows []Row
	for _, w := range []int{1, 2} {
		for _, b := range []int{0, 100, 1000} { // 0: a row written before rows carried their batch
			rows = append(rows,
				Row{Dialect: "postgres", Section: Drain, Impl: "dbq", Strategy: "advisory", Workers: w, PerSec: 10, Batch: b},
				Row{Dialect: "postgres", Section: Drain, Impl: "floor", Workers: w, PerSec: 20, Batch: b})
		}
	}
	rows = append(rows,
		Row{Dialect: "postgres", Section: Drain, Impl: "river", Case: TunedCase, PerSec: 5},
		Row{Dialect: "postgres", Section: Drain, Impl: "river", Case: TunedCase, PerSec: 7},
		Row{Dialect: "postgres", Section: Drain, Impl: "river", Case: TunedCase, PerSec: 6})
	pd := drainSeries(rows)
	want := []string{"dbq advisory", "floor", "dbq advisory batch=1000", "floor batch=1000"}
	if !slices.Equal(pd.names, want) {
		t.Errorf("lines %q, want %q", pd.names, want)
	}
	if n := len(pd.series["dbq advisory"]); n != 4 {
		t.Errorf("dbq advisory: %d points, want 4 (batch 0 and 100 at 2 worker counts)", n)
	}
	if len(pd.tuned) != 1 || pd.tuned[0].PerSec != 7 {
		t.Errorf("tuned %+v, want River's fastest (7)", pd.tuned)
	}
}
