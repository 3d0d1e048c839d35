package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
)

// The hot paths, per dialect and strategy, with allocation counts, for
// regressions: enqueue (batches of 1 and 100), claim and complete (batches
// of 100, timed apart). Run with
//
//	go test ./bench -run '^$' -bench . -benchmem
//
// A server that does not answer is skipped.

type target struct {
	name     string
	dsn      string
	d        dialect.Name
	strategy string
}

func targets(b *testing.B) []target {
	ts := []target{{name: "sqlite", dsn: "sqlite:" + filepath.Join(b.TempDir(), "hot.db"), d: dialect.SQLite}}
	for _, s := range Strategies(dialect.Postgres) {
		ts = append(ts, target{name: "postgres/" + s, dsn: dbtest.DSN(dialect.Postgres), d: dialect.Postgres, strategy: s})
	}
	return append(ts, target{name: "mysql", dsn: dbtest.DSN(dialect.MySQL), d: dialect.MySQL})
}

func openEnv(b *testing.B, t target) *env {
	b.Helper()
	r, err := New(t.dsn, Config{})
	if err != nil {
		b.Fatal(err)
	}
	e, err := r.fresh(context.Background(), t.strategy)
	if err != nil {
		dbtest.Unreachable(b, t.d, err)
	}
	b.Cleanup(func() {
		if err := e.close(context.Background()); err != nil {
			b.Errorf("drop tables: %v", err)
		}
	})
	return e
}

func BenchmarkEnqueue(b *testing.B) {
	for _, t := range targets(b) {
		for _, size := range []int{1, 100} {
			b.Run(fmt.Sprintf("%s/batch=%d", t.name, size), func(b *testing.B) {
				e := openEnv(b, t)
				ctx := context.Background()
				jobs := make([]queue.NewJob, size)
				for i := range jobs {
					jobs[i] = queue.NewJob{Queue: benchQueue, Payload: []byte(`{}`)}
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := e.q.Enqueue(ctx, jobs...); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "jobs/s")
			})
		}
	}
}

// BenchmarkClaim and BenchmarkComplete each time one half of a batch of
// 100's round trip; the other half runs with the timer stopped.
func BenchmarkClaim(b *testing.B)    { benchClaimComplete(b, true) }
func BenchmarkComplete(b *testing.B) { benchClaimComplete(b, false) }

func benchClaimComplete(b *testing.B, timeClaim bool) {
	const batch = 100
	for _, t := range targets(b) {
		b.Run(t.name, func(b *testing.B) {
			e := openEnv(b, t)
			ctx := context.Background()
			c, err := e.q.NewClaimer(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(ctx)
			b.ReportAllocs()
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				if err := fill(ctx, e.q, batch, 0); err != nil {
					b.Fatal(err)
				}
				if timeClaim {
					b.StartTimer()
				}
				jobs, err := c.Claim(ctx, benchQueue, batch)
				if timeClaim {
					b.StopTimer()
				}
				if err != nil || len(jobs) != batch {
					b.Fatalf("claim: %d jobs, %v", len(jobs), err)
				}
				if !timeClaim {
					b.StartTimer()
				}
				err = c.Complete(ctx, queue.Leases(jobs))
				if !timeClaim {
					b.StopTimer()
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// BenchmarkCompleteClaim times the round trip a Worker makes per batch
// when its claimer is a queue.CompleteClaimer: complete the last batch of
// 100 and claim the next. Dialects without it are skipped.
func BenchmarkCompleteClaim(b *testing.B) {
	const batch = 100
	for _, t := range targets(b) {
		b.Run(t.name, func(b *testing.B) {
			e := openEnv(b, t)
			ctx := context.Background()
			c, err := e.q.NewClaimer(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(ctx)
			cc, ok := c.(queue.CompleteClaimer)
			if !ok {
				b.Skipf("%T is not a queue.CompleteClaimer", c)
			}
			if err := fill(ctx, e.q, batch, 0); err != nil {
				b.Fatal(err)
			}
			held, err := c.Claim(ctx, benchQueue, batch)
			if err != nil || len(held) != batch {
				b.Fatalf("claim: %d jobs, %v", len(held), err)
			}
			b.ReportAllocs()
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				if err := fill(ctx, e.q, batch, 0); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				res := cc.CompleteClaim(ctx, queue.CompleteClaimParams{Complete: queue.Leases(held), Queue: benchQueue, N: batch})
				b.StopTimer()
				if res.CompleteErr != nil || res.ClaimErr != nil || len(res.Jobs) != batch {
					b.Fatalf("complete: %v; claim: %d jobs, %v", res.CompleteErr, len(res.Jobs), res.ClaimErr)
				}
				held = res.Jobs
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
