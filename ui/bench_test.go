package ui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/ui"
)

// BenchmarkPages measures the server time of the Queues, Jobs and Job pages
// over a table of DBQ_UI_BENCH_JOBS jobs (default 10,000) in 10 queues, one
// in a thousand dead, and of Stats, which the Queues page counted with
// before CountQueues. Each reports its median (p50-ms) besides the mean:
//
//	DBQ_UI_BENCH_JOBS=1000000 go test -run - -bench Pages/postgres -benchtime 50x ./ui/
func BenchmarkPages(b *testing.B) {
	n := 10_000
	if s := os.Getenv("DBQ_UI_BENCH_JOBS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1000 {
			b.Fatalf("DBQ_UI_BENCH_JOBS=%q: want a number >= 1000", s)
		}
	}
	for _, db := range testDBs {
		b.Run(string(db.d), func(b *testing.B) {
			e := newEnv(b, db)
			var first, mid, dead int64
			batch := make([]queue.NewJob, 0, 5000)
			for i := 0; i < n; {
				batch = batch[:0]
				for ; i < n && len(batch) < cap(batch); i++ {
					batch = append(batch, queue.NewJob{Queue: fmt.Sprintf("q%d", i%10), Payload: []byte(`{"n":1}`)})
				}
				ids := e.enqueue(b, batch...)
				if first == 0 {
					first = ids[0]
				}
				if mid == 0 && i >= n/2 {
					mid = ids[len(ids)-1]
				}
			}
			// Dead jobs spread over the table, in queue q0.
			c, err := e.q.NewClaimer(ctxT(b))
			if err != nil {
				b.Fatal(err)
			}
			for range n / 1000 {
				jobs, err := c.Claim(ctxT(b), "q0", 1)
				if err != nil || len(jobs) != 1 {
					b.Fatal(jobs, err)
				}
				if err := c.Retry(ctxT(b), []queue.RetryParams{{Lease: jobs[0].Lease(), Dead: true, Error: "x"}}); err != nil {
					b.Fatal(err)
				}
				dead = jobs[0].ID
			}
			c.Close(ctxT(b))
			h, err := ui.NewHandler(e.q, ui.Options{})
			if err != nil {
				b.Fatal(err)
			}
			for _, p := range []struct{ name, path string }{
				{"Queues", "/"},
				{"Jobs", "/jobs"},
				{"JobsOfQueueDeep", fmt.Sprintf("/jobs?queue=q3&after=%d", mid)},
				{"DeadOfQueue", "/jobs?queue=q0&state=dead"},
				{"Job", fmt.Sprintf("/jobs/%d", dead)},
			} {
				b.Run(p.name, func(b *testing.B) {
					var took []time.Duration
					for b.Loop() {
						start := time.Now()
						w := httptest.NewRecorder()
						h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+p.path, nil))
						took = append(took, time.Since(start))
						if w.Code != http.StatusOK {
							b.Fatalf("%s: %d %s", p.path, w.Code, w.Body)
						}
					}
					reportP50(b, took)
				})
			}
			// What the Queues page cost when it counted with Stats, for
			// comparison.
			b.Run("Stats", func(b *testing.B) {
				var took []time.Duration
				for b.Loop() {
					start := time.Now()
					if _, err := e.q.Stats(ctxT(b)); err != nil {
						b.Fatal(err)
					}
					took = append(took, time.Since(start))
				}
				reportP50(b, took)
			})
		})
	}
}

// reportP50 reports the median of took in milliseconds.
func reportP50(b *testing.B, took []time.Duration) {
	if len(took) == 0 {
		return
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2])/float64(time.Millisecond), "p50-ms")
}
