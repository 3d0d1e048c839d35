// Package schedule runs recurring jobs: cron schedules whose every tick
// enqueues one job on a [queue.Queue], exactly once however many processes
// run the schedule.
//
//	sc, err := schedule.New(q, []schedule.Schedule{{
//		Name: "nightly-report", Spec: "0 3 * * *", TimeZone: "Europe/Berlin",
//		Queue: "reports", Payload: []byte(`{"kind":"nightly"}`),
//	}}, schedule.Config{})
//	...
//	go sc.Run(ctx) // beside the Workers, or in a process of its own
//
// # One job per tick, without a leader
//
// The schedules table (migration 00004) holds a row per schedule with the
// last tick recorded. To enqueue tick T a scheduler runs, in one
// transaction,
//
//	UPDATE schedules SET last_tick = T, next_tick = … WHERE name = ? AND (last_tick IS NULL OR last_tick < T)
//
// and inserts T's job only when that UPDATE changed the row. The UPDATE
// takes the row's lock, so a second scheduler racing for T waits for the
// first to commit and then finds last_tick no longer older than T; a
// scheduler that comes later finds the same. The job carries the dedupe key
// "schedule:NAME:T" as a second guard: should the row be lost or reset, a
// tick whose job is still stored is not enqueued again.
//
// The alternative — electing a leader that alone enqueues, as River and
// Oban do — needs a lease that a dead or frozen leader holds until it
// expires (ticks missed meanwhile) and that a leader paused past its lease
// can act on after a successor took over (ticks twice: River #283). Here
// every scheduler is equal and none holds anything between transactions,
// so one can die at any moment: the tick it was recording either committed
// with its job or did not happen, and the next scheduler records it. The
// cost is one short transaction per tick per scheduler, which is nothing
// at cron rates. It works the same on every dialect and whatever claimer
// the workers use, since it only touches the schedules table and inserts a
// job as Enqueue does.
//
// Ticks are instants computed from the spec alone (an @every spec ticks at
// multiples of its duration since the Unix epoch), so every process
// computes the same ticks. A tick's job has run_at = the tick, so a
// scheduler whose clock runs ahead enqueues early but the job still waits
// for its time on the database clock; one whose clock lags only loses the
// race to the others.
//
// # Missed ticks, pausing, time zones
//
// After downtime a scheduler enqueues only the latest missed tick
// ([MissedLatest], the default), none ([MissedNone]) or each of the latest
// MaxMissed ([MissedEach]); the others are reported to [Hooks] as skipped.
// A paused schedule's ticks are recorded without a job, so resuming does
// not fire a stale tick. Specs are read in their time zone (UTC by
// default); see [Spec.Next] for daylight-saving changes.
//
// The table's rows show each schedule's spec, zone, last and next tick and
// paused flag: `dbq schedules list`, pause and resume read and set them.
// A schedule no process runs any more keeps its row; its next tick then
// lies in the past.
package schedule
