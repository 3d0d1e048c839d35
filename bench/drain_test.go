package bench

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDrainBatchReachesWorkers: Config.DrainBatch is what the drain's
// Workers claim with and what the floor deletes per statement. A batch of
// 1,001 is one no Worker takes (queue.WorkerConfig allows 1..1000), so
// dbq's row fails on it, naming it, while the floor, which has no such
// bound, drains.
func TestDrainBatchReachesWorkers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := New("sqlite:"+filepath.Join(t.TempDir(), "drain.db"), Config{
		Sections: []string{Drain}, N: 2500, Workers: []int{1}, DrainBatch: 1001,
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("rows %+v, want dbq's and the floor's", rows)
	}
	for _, row := range rows {
		if row.Case != "workers=1 batch=1001" || row.Batch != 1001 {
			t.Errorf("row %+v: want case \"workers=1 batch=1001\" and batch 1001", row)
		}
		switch row.Impl {
		case "dbq":
			if !strings.Contains(row.Err, "BatchSize 1001") || row.Concurrency != 1001 {
				t.Errorf("dbq row %+v: want concurrency 1001 and an error naming BatchSize 1001", row)
			}
		case "floor":
			if row.Err != "" || row.PerSec <= 0 {
				t.Errorf("floor row %+v: want a throughput", row)
			}
		}
	}
}
