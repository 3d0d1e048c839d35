package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/prometheus/client_golang/prometheus"
)

// CollectorConfig tunes a QueueCollector. The zero value means the
// defaults its fields document.
type CollectorConfig struct {
	// Timeout bounds the Queue.Stats (and Queue.Health) calls of one
	// scrape. Default 5s.
	Timeout time.Duration
	// Logger receives failed scrapes. Default: the Queue's logger.
	Logger *slog.Logger
	// ByKind also reports dbq_queue_jobs_by_kind, the stored jobs per
	// queue, kind and state, with a second count per scrape
	// (Queue.StatsByKind). At most MaxKinds queue and kind pairs get their
	// own series; the rest are summed under kind "other". Jobs with no
	// kind are reported with kind "". Default off.
	ByKind bool
}

// QueueCollector is a prometheus.Collector that reports every queue of a
// Queue's table — jobs ready, scheduled, held and dead, whether it is
// paused, and the oldest ready job's wait — by calling Queue.Stats on each
// scrape. Where the driver reports the database's health
// (queue.HealthReporter: PostgreSQL) it also reports, from Queue.Health,
// how long the MVCC horizon has been held and the jobs table's dead and
// live rows. Concurrent scrapes share one Stats call at a time, so a slow
// database is not queried more often than its count finishes.
type QueueCollector struct {
	q       *queue.Queue
	byKind  bool
	timeout time.Duration
	log     *slog.Logger
	sem     chan struct{} // one Stats at a time
}

var _ prometheus.Collector = (*QueueCollector)(nil)

var (
	jobsDesc = prometheus.NewDesc("dbq_queue_jobs",
		"Stored jobs by state: ready (run_at passed), scheduled (run_at ahead), held (claimed), dead.",
		[]string{"queue", "state"}, nil)
	pausedDesc = prometheus.NewDesc("dbq_queue_paused",
		"1 while the queue is paused: claims take none of its jobs.", []string{"queue"}, nil)
	oldestDesc = prometheus.NewDesc("dbq_queue_oldest_ready_age_seconds",
		"How long the oldest ready job has waited past its run_at; 0 with no ready job.", []string{"queue"}, nil)
	kindDesc = prometheus.NewDesc("dbq_queue_jobs_by_kind",
		"Stored jobs by kind and state (CollectorConfig.ByKind); kinds past the first 200 queue and kind pairs are summed as \"other\".",
		[]string{"queue", "kind", "state"}, nil)
	upDesc = prometheus.NewDesc("dbq_queue_stats_up",
		"1 when this scrape's count of stored jobs succeeded, 0 when it failed or timed out.", nil, nil)

	// The database's health (queue.Health), where the driver reports it.
	horizonAgeDesc = prometheus.NewDesc("dbq_db_horizon_age_seconds",
		"How long the session or prepared transaction that has held the database's MVCC horizon back longest has been open; 0 when none.", nil, nil)
	horizonXIDDesc = prometheus.NewDesc("dbq_db_horizon_xid_age",
		"Age in transaction ids of the oldest horizon holding back vacuum of the jobs table (sessions, replication slots, prepared transactions); 0 when none.", nil, nil)
	deadRowsDesc = prometheus.NewDesc("dbq_jobs_table_dead_rows",
		"Dead rows of the jobs table that vacuum has not yet removed, as the database's statistics estimate them.", nil, nil)
	liveRowsDesc = prometheus.NewDesc("dbq_jobs_table_live_rows",
		"Live rows of the jobs table, as the database's statistics estimate them.", nil, nil)
	healthDescs = []*prometheus.Desc{horizonAgeDesc, horizonXIDDesc, deadRowsDesc, liveRowsDesc}
)

// NewQueueCollector returns a collector over q. Register it with
// prometheus.Registerer.Register; it queries q on every scrape.
func NewQueueCollector(q *queue.Queue, cfg CollectorConfig) *QueueCollector {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = q.Config().Logger
	}
	return &QueueCollector{q: q, byKind: cfg.ByKind, timeout: cfg.Timeout, log: cfg.Logger, sem: make(chan struct{}, 1)}
}

// Describe sends the collector's metric descriptions.
func (c *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range append([]*prometheus.Desc{jobsDesc, pausedDesc, oldestDesc, upDesc}, healthDescs...) {
		ch <- d
	}
	if c.byKind {
		ch <- kindDesc
	}
}

// Collect counts the queues' jobs and sends the gauges. A failed count
// sends only dbq_queue_stats_up 0, so the rest of the scrape — the worker
// metrics — still gets through. A failed health report is logged and its
// gauges left out.
func (c *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	stats, kinds, health, err := c.stats()
	if err != nil {
		c.log.Warn("dbq: metrics: counting jobs failed", "err", err)
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, 1)
	for _, s := range stats {
		for _, st := range [...]struct {
			state string
			n     int64
		}{{"ready", s.Ready}, {"scheduled", s.Scheduled}, {"held", s.Held}, {"dead", s.Dead}} {
			ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(st.n), s.Queue, st.state)
		}
		paused := 0.0
		if s.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, paused, s.Queue)
		ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, s.OldestReadyAge, s.Queue)
	}
	for _, s := range boundKinds(kinds) {
		for _, st := range [...]struct {
			state string
			n     int64
		}{{"ready", s.Ready}, {"scheduled", s.Scheduled}, {"held", s.Held}, {"dead", s.Dead}} {
			ch <- prometheus.MustNewConstMetric(kindDesc, prometheus.GaugeValue, float64(st.n), s.Queue, s.Kind, st.state)
		}
	}
	if health != nil {
		old, _ := health.Oldest()
		for _, g := range [...]struct {
			d *prometheus.Desc
			v float64
		}{
			{horizonAgeDesc, old.Age.Seconds()},
			{horizonXIDDesc, float64(health.XIDAge())},
			{deadRowsDesc, float64(health.Table.DeadRows)},
			{liveRowsDesc, float64(health.Table.LiveRows)},
		} {
			ch <- prometheus.MustNewConstMetric(g.d, prometheus.GaugeValue, g.v)
		}
	}
}

// boundKinds keeps the first MaxKinds queue and kind pairs of st and sums
// the rest of each queue under kind "other".
func boundKinds(st []queue.KindStats) []queue.KindStats {
	if len(st) <= MaxKinds {
		return st
	}
	out := slices.Clone(st[:MaxKinds])
	other := map[string]int{} // queue -> index in out
	for _, s := range st[MaxKinds:] {
		i, ok := other[s.Queue]
		if !ok {
			i = len(out)
			other[s.Queue] = i
			out = append(out, queue.KindStats{Queue: s.Queue, Kind: "other"})
		}
		o := &out[i]
		o.Ready, o.Scheduled, o.Held, o.Dead = o.Ready+s.Ready, o.Scheduled+s.Scheduled, o.Held+s.Held, o.Dead+s.Dead
	}
	return out
}

// stats reads the counts, the counts by kind when asked, and the health
// report when the driver has one (nil otherwise, or when it failed).
func (c *QueueCollector) stats() ([]queue.QueueStats, []queue.KindStats, *queue.Health, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	// Waiting for another scrape's count counts against the timeout too.
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, nil, fmt.Errorf("dbq: waiting for another scrape's count: %w", ctx.Err())
	}
	defer func() { <-c.sem }()
	st, err := c.q.Stats(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	var kinds []queue.KindStats
	if c.byKind {
		if kinds, err = c.q.StatsByKind(ctx); err != nil {
			return nil, nil, nil, err
		}
	}
	h, err := c.q.Health(ctx)
	switch {
	case errors.Is(err, queue.ErrUnsupported):
		return st, kinds, nil, nil
	case err != nil:
		c.log.Warn("dbq: metrics: reading the database's health failed", "err", err)
		return st, kinds, nil, nil
	}
	return st, kinds, &h, nil
}
