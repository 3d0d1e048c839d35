package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/metrics"
	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/sqlite"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// openQueue returns a migrated SQLite queue in a temp dir.
func openQueue(t *testing.T) *queue.Queue {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metrics.db")
	db, err := sqlite.OpenDB(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sqlite.Config{Config: queue.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	if err := sqlite.Migrate(ctx, db, cfg); err != nil {
		t.Fatal(err)
	}
	db.Close()
	q, err := sqlite.Open(ctx, path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// values gathers reg into name{label="v",…} -> value: a counter's or
// gauge's value, a histogram's sample count.
func values(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(ls)
			key := mf.GetName() + "{" + strings.Join(ls, ",") + "}"
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out
}

func check(t *testing.T, got map[string]float64, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
}

func TestHooksCountsCalls(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	h, err := metrics.NewHooks(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := metrics.NewHooks(reg); err == nil {
		t.Error("a second NewHooks on the same registry succeeded")
	}
	h.ClaimDone("a", 10, 4, time.Millisecond, nil)
	h.ClaimDone("a", 10, 0, time.Millisecond, nil)
	h.ClaimDone("a", 10, 0, time.Millisecond, errors.New("down"))
	j := &queue.Job{ID: 1, Queue: "a"}
	ctx := context.Background()
	if got := h.JobStart(ctx, j); got != ctx {
		t.Error("JobStart changed the context")
	}
	for _, o := range []queue.Outcome{queue.OutcomeCompleted, queue.OutcomeCompleted, queue.OutcomeDead, queue.OutcomeSnoozed, queue.OutcomeLeaseLost} {
		h.JobEnd(ctx, j, o, 20*time.Millisecond, nil)
	}
	h.LeasesLost("a", []int64{1})
	h.ClaimDone("b", 1, 0, time.Millisecond, nil)

	got := values(t, reg)
	check(t, got, map[string]float64{
		`dbq_jobs_claimed_total{queue="a"}`:                  4,
		`dbq_claims_total{queue="a"}`:                        3,
		`dbq_claims_empty_total{queue="a"}`:                  1,
		`dbq_claim_errors_total{queue="a"}`:                  1,
		`dbq_claim_duration_seconds{queue="a"}`:              3,
		`dbq_job_runs_total{outcome="completed",queue="a"}`:  2,
		`dbq_job_runs_total{outcome="dead",queue="a"}`:       1,
		`dbq_job_runs_total{outcome="snoozed",queue="a"}`:    1,
		`dbq_job_runs_total{outcome="lease_lost",queue="a"}`: 1,
		`dbq_job_runs_total{outcome="retried",queue="a"}`:    0,
		`dbq_job_run_duration_seconds{queue="a"}`:            5,
		`dbq_claims_empty_total{queue="b"}`:                  1,
		`dbq_job_runs_total{outcome="completed",queue="b"}`:  0, // created at the first claim
		`dbq_jobs_claimed_total{queue="b"}`:                  0,
	})
	if probs, err := testutil.GatherAndLint(reg); err != nil || len(probs) > 0 {
		t.Errorf("lint: %v %+v", err, probs)
	}
}

// A Worker on a real SQLite queue, with the hooks, counts what it did.
func TestHooksOnWorker(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	ctx := context.Background()
	var jobs []queue.NewJob
	for i := range 6 {
		p := "ok"
		if i%3 == 0 {
			p = "bad"
		}
		jobs = append(jobs, queue.NewJob{Queue: "w", Payload: []byte(p)})
	}
	if _, err := q.Enqueue(ctx, jobs...); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	h, err := metrics.NewHooks(reg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := queue.NewWorker(q, func(_ context.Context, j *queue.Job) error {
		if string(j.Payload) == "bad" {
			return queue.Permanent(errors.New("bad job"))
		}
		return nil
	}, queue.WorkerConfig{Queue: "w", Concurrency: 3, PollInterval: 10 * time.Millisecond, Hooks: h})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for st := w.Stats(); st.Completed+st.Dead < 6 && time.Now().Before(deadline); st = w.Stats() {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := values(t, reg)
	check(t, got, map[string]float64{
		`dbq_jobs_claimed_total{queue="w"}`:                 6,
		`dbq_job_runs_total{outcome="completed",queue="w"}`: 4,
		`dbq_job_runs_total{outcome="dead",queue="w"}`:      2,
		`dbq_job_runs_total{outcome="retried",queue="w"}`:   0,
		`dbq_job_run_duration_seconds{queue="w"}`:           6,
		`dbq_claim_errors_total{queue="w"}`:                 0,
	})
	if got[`dbq_claims_total{queue="w"}`] < 1 || got[`dbq_claim_duration_seconds{queue="w"}`] != got[`dbq_claims_total{queue="w"}`] {
		t.Errorf("claims %v, claim latencies %v: want one latency per claim",
			got[`dbq_claims_total{queue="w"}`], got[`dbq_claim_duration_seconds{queue="w"}`])
	}
}

// The depth collector reports what Queue.Stats counts, per queue and
// state, and says so when the count fails.
func TestQueueCollector(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	ctx := context.Background()
	mk := func(queueName string, n int, delay time.Duration) {
		t.Helper()
		jobs := make([]queue.NewJob, n)
		for i := range jobs {
			jobs[i] = queue.NewJob{Queue: queueName, Delay: delay}
		}
		if _, err := q.Enqueue(ctx, jobs...); err != nil {
			t.Fatal(err)
		}
	}
	mk("a", 4, 0)
	mk("a", 1, time.Hour)
	mk("b", 1, 0)
	c, err := q.NewClaimer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	held, err := c.Claim(ctx, "a", 2)
	if err != nil || len(held) != 2 {
		t.Fatalf("claim: %v, %d jobs", err, len(held))
	}
	if err := c.Retry(ctx, []queue.RetryParams{{Lease: held[1].Lease(), Error: "x", Dead: true}}); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewPedanticRegistry()
	coll := metrics.NewQueueCollector(q, metrics.CollectorConfig{Timeout: 10 * time.Second})
	if err := reg.Register(coll); err != nil {
		t.Fatal(err)
	}
	got := values(t, reg)
	check(t, got, map[string]float64{
		`dbq_queue_stats_up{}`:                        1,
		`dbq_queue_jobs{queue="a",state="ready"}`:     2,
		`dbq_queue_jobs{queue="a",state="scheduled"}`: 1,
		`dbq_queue_jobs{queue="a",state="held"}`:      1,
		`dbq_queue_jobs{queue="a",state="dead"}`:      1,
		`dbq_queue_jobs{queue="b",state="ready"}`:     1,
		`dbq_queue_jobs{queue="b",state="dead"}`:      0,
		`dbq_queue_paused{queue="a"}`:                 0,
	})
	if age, ok := got[`dbq_queue_oldest_ready_age_seconds{queue="a"}`]; !ok || age < 0 {
		t.Errorf("oldest ready age %v (present %v), want >= 0", age, ok)
	}
	if n := testutil.CollectAndCount(coll, "dbq_queue_jobs"); n != 8 {
		t.Errorf("%d dbq_queue_jobs series, want 4 states x 2 queues", n)
	}
	if probs, err := testutil.GatherAndLint(reg); err != nil || len(probs) > 0 {
		t.Errorf("lint: %v %+v", err, probs)
	}

	// A count that fails leaves only up = 0, and the scrape still works.
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	q.Close()
	got = values(t, reg)
	if got[`dbq_queue_stats_up{}`] != 0 || len(got) != 1 {
		t.Errorf("after Close: %v, want only dbq_queue_stats_up 0", got)
	}
}

// Runs are counted per kind too, and the series per (queue, kind) are
// bounded: kinds past MaxKinds are counted as "other".
func TestHooksByKind(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	h, err := metrics.NewHooks(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h.JobEnd(ctx, &queue.Job{Queue: "a", Kind: "email"}, queue.OutcomeCompleted, time.Millisecond, nil)
	h.JobEnd(ctx, &queue.Job{Queue: "a", Kind: "email"}, queue.OutcomeDead, time.Millisecond, nil)
	h.JobEnd(ctx, &queue.Job{Queue: "a"}, queue.OutcomeCompleted, time.Millisecond, nil) // no kind
	for i := range metrics.MaxKinds + 5 {
		h.JobEnd(ctx, &queue.Job{Queue: "b", Kind: fmt.Sprintf("k%d", i)}, queue.OutcomeCompleted, time.Millisecond, nil)
	}
	got := values(t, reg)
	check(t, got, map[string]float64{
		`dbq_job_runs_by_kind_total{kind="email",outcome="completed",queue="a"}`: 1,
		`dbq_job_runs_by_kind_total{kind="email",outcome="dead",queue="a"}`:      1,
		`dbq_job_runs_by_kind_total{kind="other",outcome="completed",queue="b"}`: 6,
		`dbq_job_runs_total{outcome="completed",queue="a"}`:                      2,
	})
	series := 0
	for k := range got {
		if strings.HasPrefix(k, "dbq_job_runs_by_kind_total{") && strings.Contains(k, `outcome="completed"`) {
			series++
		}
	}
	if series != metrics.MaxKinds+1 {
		t.Errorf("%d by-kind series of completed runs, want MaxKinds (%d) + other", series, metrics.MaxKinds)
	}
}

// With ByKind, the collector reports stored jobs per queue, kind and state.
func TestQueueCollectorByKind(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	ctx := context.Background()
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "a", Kind: "email"}, queue.NewJob{Queue: "a", Kind: "email"},
		queue.NewJob{Queue: "a", Kind: "resize", Delay: time.Hour}, queue.NewJob{Queue: "a"}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(metrics.NewQueueCollector(q, metrics.CollectorConfig{ByKind: true})); err != nil {
		t.Fatal(err)
	}
	check(t, values(t, reg), map[string]float64{
		`dbq_queue_jobs_by_kind{kind="email",queue="a",state="ready"}`:      2,
		`dbq_queue_jobs_by_kind{kind="resize",queue="a",state="scheduled"}`: 1,
		`dbq_queue_jobs_by_kind{kind="",queue="a",state="ready"}`:           1,
		`dbq_queue_jobs{queue="a",state="ready"}`:                           3,
	})
}
