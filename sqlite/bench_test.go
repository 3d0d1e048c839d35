package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// BenchmarkClaimComplete drains b.N jobs with N claimers taking batches of
// k (claim, then complete the batch) and reports jobs/s. "nogate" runs the
// same without the in-process write gate, so every writer polls SQLite's
// file lock in the busy handler; "2proc" splits the claimers over two
// Queues (two pools, two gates) on one file, as two processes would.
func BenchmarkClaimComplete(b *testing.B) {
	for _, mode := range []string{"gate", "nogate", "2proc"} {
		for _, claimers := range []int{1, 4, 16, 64} {
			for _, batch := range []int{1, 10, 100} {
				b.Run(fmt.Sprintf("%s/claimers=%d/batch=%d", mode, claimers, batch), func(b *testing.B) {
					benchDrain(b, mode, claimers, batch)
				})
			}
		}
	}
}

func benchDrain(b *testing.B, mode string, claimers, batch int) {
	path := filepath.Join(b.TempDir(), "bench.db")
	q1 := newTestQueue(b, path, queue.Config{}, true)
	qs := []*queue.Queue{q1}
	if mode == "2proc" {
		qs = append(qs, newTestQueue(b, path, queue.Config{}, false))
	}
	for _, q := range qs {
		driverOf(b, q).noGate = mode == "nogate"
	}
	ctx := context.Background()
	payload := make([]byte, 100)
	for left := b.N; left > 0; {
		jobs := make([]queue.NewJob, min(left, enqueueChunk))
		for i := range jobs {
			jobs[i] = queue.NewJob{Queue: "bench", Payload: payload}
		}
		if _, err := q1.Enqueue(ctx, jobs...); err != nil {
			b.Fatal(err)
		}
		left -= len(jobs)
	}
	var done, worst atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for i := range claimers {
		c, err := qs[i%len(qs)].NewClaimer(ctx)
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			defer c.Close(ctx)
			for {
				t0 := time.Now()
				jobs, err := c.Claim(ctx, "bench", batch)
				if d := int64(time.Since(t0)); d > worst.Load() {
					worst.Store(d) // racy max, good enough for a report
				}
				if err != nil {
					b.Error(err)
					return
				}
				if len(jobs) == 0 {
					return
				}
				ls := make([]queue.Lease, len(jobs))
				for i, j := range jobs {
					ls[i] = j.Lease()
				}
				if err := c.Complete(ctx, ls); err != nil {
					b.Error(err)
					return
				}
				done.Add(int64(len(jobs)))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if got := done.Load(); got != int64(b.N) {
		b.Fatalf("completed %d of %d", got, b.N)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
	b.ReportMetric(float64(worst.Load())/1e6, "max-claim-ms")
}

// BenchmarkEnqueue inserts batches of k jobs from one goroutine.
func BenchmarkEnqueue(b *testing.B) {
	for _, batch := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			q := newQ(b, queue.Config{})
			payload := make([]byte, 100)
			jobs := make([]queue.NewJob, batch)
			for i := range jobs {
				jobs[i] = queue.NewJob{Queue: "bench", Payload: payload}
			}
			ctx := context.Background()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if _, err := q.Enqueue(ctx, jobs...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "jobs/s")
		})
	}
}
