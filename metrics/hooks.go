package metrics

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/prometheus/client_golang/prometheus"
)

// Hooks is a queue.Hooks that records workers' claims and runs. One Hooks
// serves any number of workers, on any queues; make one per registry.
type Hooks struct {
	claimed      *prometheus.CounterVec
	runs         *prometheus.CounterVec
	runSeconds   *prometheus.HistogramVec
	claims       *prometheus.CounterVec
	emptyClaims  *prometheus.CounterVec
	claimErrors  *prometheus.CounterVec
	claimSeconds *prometheus.HistogramVec
	kindRuns     *prometheus.CounterVec

	byQueue sync.Map // queue name -> *queueSeries
	byKind  sync.Map // kindKey -> []prometheus.Counter, by queue.Outcome
	kinds   sync.Mutex
	nKinds  int // distinct (queue, kind) series made, at most MaxKinds
}

// MaxKinds bounds the (queue, kind) pairs dbq_job_runs_by_kind_total has
// series for, per Hooks: the kinds a process meets first get their own
// series, any later one is counted under kind="other". Kinds are names in
// code, so a deployment has tens of them; the bound keeps a bug that
// makes kinds from data from flooding the registry.
const MaxKinds = 200

type kindKey struct{ queue, kind string }

var _ queue.Hooks = (*Hooks)(nil)

// queueSeries holds one queue's series, resolved once so that a job costs
// no label lookup.
type queueSeries struct {
	claimed, claims, empty, claimErrors prometheus.Counter
	runs                                []prometheus.Counter // by queue.Outcome
	runSeconds, claimSeconds            prometheus.Observer
}

// Bucket bounds, in seconds. Claims are single statements: milliseconds
// unless the database is struggling. Handlers may run for minutes.
var (
	claimBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	runBuckets   = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
)

// NewHooks makes the worker metrics and registers them on reg (nil:
// prometheus.DefaultRegisterer). Registering on a registry that has them
// already fails.
func NewHooks(reg prometheus.Registerer) (*Hooks, error) {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append([]string{"queue"}, labels...))
	}
	histogram := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, []string{"queue"})
	}
	h := &Hooks{
		claimed:      counter("dbq_jobs_claimed_total", "Jobs claimed by workers."),
		runs:         counter("dbq_job_runs_total", "Job runs ended, by outcome: completed, retried, dead, snoozed, released, lease_lost or unrecorded.", "outcome"),
		runSeconds:   histogram("dbq_job_run_duration_seconds", "How long handlers ran.", runBuckets),
		claims:       counter("dbq_claims_total", "Claims made by workers."),
		emptyClaims:  counter("dbq_claims_empty_total", "Claims that found no ready job."),
		claimErrors:  counter("dbq_claim_errors_total", "Claims that failed."),
		claimSeconds: histogram("dbq_claim_duration_seconds", "How long claims took.", claimBuckets),
		kindRuns: counter("dbq_job_runs_by_kind_total", "Job runs ended, by job kind and outcome (jobs with a kind only; "+
			"at most 200 queue and kind pairs, later ones counted as kind \"other\").", "kind", "outcome"),
	}
	var errs []error
	for _, c := range []prometheus.Collector{h.claimed, h.runs, h.runSeconds, h.claims, h.emptyClaims, h.claimErrors, h.claimSeconds, h.kindRuns} {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *Hooks) series(q string) *queueSeries {
	if s, ok := h.byQueue.Load(q); ok {
		return s.(*queueSeries)
	}
	s := &queueSeries{
		claimed:      h.claimed.WithLabelValues(q),
		claims:       h.claims.WithLabelValues(q),
		empty:        h.emptyClaims.WithLabelValues(q),
		claimErrors:  h.claimErrors.WithLabelValues(q),
		runSeconds:   h.runSeconds.WithLabelValues(q),
		claimSeconds: h.claimSeconds.WithLabelValues(q),
	}
	for _, o := range queue.Outcomes() {
		s.runs = append(s.runs, h.runs.WithLabelValues(q, o.String()))
	}
	actual, _ := h.byQueue.LoadOrStore(q, s)
	return actual.(*queueSeries)
}

// ClaimDone counts a claim, its jobs, and its latency.
func (h *Hooks) ClaimDone(q string, asked, got int, took time.Duration, err error) {
	s := h.series(q)
	s.claims.Inc()
	s.claimSeconds.Observe(took.Seconds())
	switch {
	case err != nil:
		s.claimErrors.Inc()
	case got == 0:
		s.empty.Inc()
	default:
		s.claimed.Add(float64(got))
	}
}

// JobStart returns ctx: metrics need nothing from the start of a run.
func (h *Hooks) JobStart(ctx context.Context, _ *queue.Job) context.Context { return ctx }

// JobEnd counts the run under its outcome and records its duration.
func (h *Hooks) JobEnd(_ context.Context, j *queue.Job, o queue.Outcome, took time.Duration, _ error) {
	s := h.series(j.Queue)
	if int(o) >= 0 && int(o) < len(s.runs) {
		s.runs[o].Inc()
	}
	s.runSeconds.Observe(took.Seconds())
	if j.Kind != "" && int(o) >= 0 {
		if runs := h.kindSeries(j.Queue, j.Kind); int(o) < len(runs) {
			runs[o].Inc()
		}
	}
}

// kindSeries returns the by-kind counters of (q, kind), or of (q, "other")
// once MaxKinds pairs have series.
func (h *Hooks) kindSeries(q, kind string) []prometheus.Counter {
	k := kindKey{q, kind}
	if s, ok := h.byKind.Load(k); ok {
		return s.([]prometheus.Counter)
	}
	h.kinds.Lock()
	defer h.kinds.Unlock()
	if s, ok := h.byKind.Load(k); ok {
		return s.([]prometheus.Counter)
	}
	if h.nKinds >= MaxKinds {
		k.kind = "other"
		if s, ok := h.byKind.Load(k); ok {
			return s.([]prometheus.Counter)
		}
	} else {
		h.nKinds++
	}
	runs := make([]prometheus.Counter, 0, len(queue.Outcomes()))
	for _, o := range queue.Outcomes() {
		runs = append(runs, h.kindRuns.WithLabelValues(q, k.kind, o.String()))
	}
	h.byKind.Store(k, runs)
	return runs
}

// LeasesLost does nothing: each such job's run is counted when it ends,
// under lease_lost, so counting here too would count it twice.
func (h *Hooks) LeasesLost(string, []int64) {}
