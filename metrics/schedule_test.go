package metrics

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dbqueue/dbq/schedule"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestScheduleHooksCountAndBoundLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, err := NewScheduleHooks(reg, 2)
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Unix(1_800_000_000, 0)
	h.TickEnqueued("a", tick, 1)
	h.TickEnqueued("a", tick.Add(time.Second), 2)
	h.TicksSkipped("a", schedule.SkipMissed, 4)
	h.TicksSkipped("b", schedule.SkipTaken, 2)
	h.TickFailed("b", errors.New("down"))
	for i := range 50 {
		h.TickEnqueued(fmt.Sprint("many", i), tick, 1)
	}
	for _, c := range []struct {
		got, want float64
	}{
		{testutil.ToFloat64(h.enqueued.WithLabelValues("a")), 2},
		{testutil.ToFloat64(h.skipped.WithLabelValues("a", "missed")), 4},
		{testutil.ToFloat64(h.skipped.WithLabelValues("b", "taken")), 2},
		{testutil.ToFloat64(h.errs.WithLabelValues("b")), 1},
		{testutil.ToFloat64(h.enqueued.WithLabelValues(OtherSchedules)), 50},
		{testutil.ToFloat64(h.lastTick.WithLabelValues("a")), 1_800_000_001},
	} {
		if c.got != c.want {
			t.Errorf("got %v, want %v", c.got, c.want)
		}
	}
	// a, b and _other: 3 schedule labels × 6 reasons.
	if n := testutil.CollectAndCount(h.skipped); n != 3*len(schedule.SkipReasons()) {
		t.Errorf("%d skipped series", n)
	}
	if _, err := NewScheduleHooks(reg, 0); err == nil {
		t.Error("registered twice")
	}
}
