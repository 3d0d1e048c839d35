package postgres

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// TestPickupLatency measures enqueue-to-handler-start latency through
// queue.Worker, one job at a time on an idle queue, with and without
// LISTEN/NOTIFY. It asserts nothing about time and runs only when asked:
//
//	DBQ_PICKUP=1 go test -run TestPickupLatency -v -count=1 ./postgres/
//
// DBQ_PICKUP_N sets the jobs per case (default 1000); the poll interval is
// 100ms so that the polling case ends in minutes.
func TestPickupLatency(t *testing.T) {
	if os.Getenv("DBQ_PICKUP") != "1" {
		t.Skip("set DBQ_PICKUP=1 to measure pickup latency")
	}
	n := 1000
	if s := os.Getenv("DBQ_PICKUP_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("DBQ_PICKUP_N=%q", s)
		}
	}
	const poll = 100 * time.Millisecond
	for _, c := range []struct {
		name   string
		notify bool
		s      Strategy
	}{
		{"advisory/notify", true, Advisory},
		{"skiplocked/notify", true, SkipLocked},
		{"advisory/poll", false, Advisory},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := newQueue(t, Config{Strategy: c.s, NoNotify: !c.notify}, true)
			started := make(chan time.Time, 1)
			w, err := queue.NewWorker(q, func(context.Context, *queue.Job) error {
				started <- time.Now()
				return nil
			}, queue.WorkerConfig{Queue: "pickup", Concurrency: 1, PollInterval: poll, DisableWakeups: !c.notify})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil && ctx.Err() == nil {
					t.Errorf("Run: %v", err)
				}
			}()
			// Let the worker reach its idle wait (and the listener start).
			time.Sleep(2 * poll)
			lat := make([]time.Duration, 0, n)
			for range n {
				t0 := time.Now()
				if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "pickup"}); err != nil {
					t.Fatal(err)
				}
				select {
				case at := <-started:
					lat = append(lat, at.Sub(t0))
				case <-time.After(30 * time.Second):
					t.Fatal("job not picked up in 30s")
				}
			}
			slices.Sort(lat)
			pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
			t.Logf("%s: %d jobs, poll %v: p50 %v, p99 %v, max %v", c.name, n, poll, pct(0.50), pct(0.99), lat[len(lat)-1])
		})
	}
}
