package postgres

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// BenchmarkWorkerActivity drains b.N jobs with one Worker (SKIP LOCKED,
// 16 handlers, batches of 100), without and with an Activity counting
// them and flushing every second: compare ns/op, the Worker's time per
// job, for what the counters cost it.
func BenchmarkWorkerActivity(b *testing.B) {
	for _, counted := range []bool{false, true} {
		b.Run(fmt.Sprintf("activity=%v", counted), func(b *testing.B) {
			q := newQueue(b, Config{Strategy: SkipLocked}, true)
			enqueueN(b, q, "bench", b.N)
			ctx, cancel := context.WithCancel(testCtx(b))
			defer cancel()
			var act *queue.Activity
			if counted {
				var err error
				if act, err = queue.NewActivity(q, queue.ActivityConfig{FlushInterval: time.Second}); err != nil {
					b.Fatal(err)
				}
				flushed := make(chan struct{})
				go func() { defer close(flushed); _ = act.Run(ctx) }()
				defer func() { <-flushed }() // before the queue closes
			}
			var done atomic.Int64
			all := make(chan struct{})
			w, err := queue.NewWorker(q, func(context.Context, *queue.Job) error {
				if done.Add(1) == int64(b.N) {
					close(all)
				}
				return nil
			}, queue.WorkerConfig{Queue: "bench", Concurrency: 16, BatchSize: 100, PollInterval: 10 * time.Millisecond, Activity: act})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			ran := make(chan error, 1)
			go func() { ran <- w.Run(ctx) }()
			<-all
			b.StopTimer()
			cancel()
			if err := <-ran; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
