package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dbqueue/dbq/bench/soak"
)

func TestPlotOneFilePerScenario(t *testing.T) {
	t.Parallel()
	var rows []soak.Row
	for _, impl := range []string{"dbq", "river"} {
		for i := 1; i <= 3; i++ {
			rows = append(rows,
				soak.Row{Impl: impl, Scenario: soak.Steady, T: float64(10 * i), Offered: 3000, Drained: 2900, DeadTup: int64(i * 1000)},
				soak.Row{Impl: impl, Scenario: soak.Burst, T: float64(10 * i), Offered: 15000, Drained: 9000, Backlog: int64(i * 6000)})
		}
	}
	prefix := filepath.Join(t.TempDir(), "soak")
	made, err := plotScenarios(prefix, rows)
	if err != nil || len(made) != 2 {
		t.Fatalf("made %v, %v", made, err)
	}
	for _, f := range made {
		if fi, err := os.Stat(f); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := plotScenarios(prefix, nil); err == nil {
		t.Error("no rows: no error")
	}
}
