// Package metrics exposes dbq workers and queues to Prometheus.
//
// [Hooks] implements queue.Hooks: give it to WorkerConfig.Hooks and it
// counts claims and runs per queue. [QueueCollector] reports the depth of
// every queue of a Queue's table, read with Queue.Stats when Prometheus
// scrapes. Register both on a registry and serve it with promhttp; `dbq
// work --metrics :9090` does exactly that.
//
// The metrics, each labelled by queue:
//
//	dbq_jobs_claimed_total                    counter   jobs claimed
//	dbq_job_runs_total{outcome}               counter   runs ended, by outcome: completed,
//	                                                    retried, dead, snoozed, released,
//	                                                    lease_lost, unrecorded
//	dbq_job_run_duration_seconds              histogram handler run time
//	dbq_claims_total                          counter   claims made
//	dbq_claims_empty_total                    counter   claims that found no job
//	dbq_claim_errors_total                    counter   claims that failed
//	dbq_claim_duration_seconds                histogram claim latency
//	dbq_queue_jobs{state}                     gauge     stored jobs: ready, scheduled, held, dead
//	dbq_queue_paused                          gauge     1 while the queue is paused
//	dbq_queue_oldest_ready_age_seconds        gauge     how long the oldest ready job has waited
//
// and, without a queue label, dbq_queue_stats_up: 1 when the last scrape's
// Queue.Stats succeeded, 0 when it failed or timed out (the per-queue
// gauges are then absent from that scrape). Where the driver reports the
// database's health (queue.HealthReporter: PostgreSQL), four more gauges
// without labels, from Queue.Health:
//
//	dbq_db_horizon_age_seconds   how long the oldest session or prepared
//	                             transaction holding the MVCC horizon has been open
//	dbq_db_horizon_xid_age       the horizon's age in transaction ids
//	dbq_jobs_table_dead_rows     dead rows vacuum has not removed (estimate)
//	dbq_jobs_table_live_rows     live rows (estimate)
//
// See docs/postgres-health.md for what to alert on.
//
// Every run counts once, under the outcome it ended with; a lease lost
// while the handler runs is counted when the run ends, as lease_lost.
// Series of a queue are created, at zero, the first time its worker
// claims, so rates over them exist from the start.
package metrics
