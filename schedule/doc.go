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
// # Identity: a schedule is its name
//
// A schedule's row, last tick and paused flag belong to its name, and
// nothing else: a scheduler that starts with a changed spec, zone, queue or
// payload under the same name takes over the same row, so an edit neither
// makes a second schedule nor unpauses a paused one (the upsert of a
// definition never writes the paused flag or the last tick).
//
// A crontab line names its schedule with name=NAME. A line without one is
// named after its queue and kind — QUEUE, or QUEUE:KIND ([LineName]) —
// because those say what the schedule is for, while the spec, zone and
// payload are what gets edited: respacing a line, changing its payload or
// moving it to another hour keeps its schedule. A name taken from the
// line's text (as before) made every edit a new schedule, and during a
// rolling deploy the old and the new line each made their own job per
// tick. Two unnamed lines on the same queue and kind would share a name,
// so ParseCrontab refuses them and asks for a name=. Rows stored under the
// old QUEUE.HASH names are run by no scheduler after an upgrade: they are
// marked stale after StaleAfter and `dbq schedules prune` removes them; a
// pause set on one is to be set again on the new name.
//
// # A changed spec
//
// The row also keeps spec_since: when the stored spec and zone replaced
// different ones, on the storing scheduler's clock. A scheduler starts
// after the later of the last tick and spec_since, so a new spec begins at
// the moment it was stored: with "0 3 * * *" fired at 03:00 and "0 4 * * *"
// deployed at 10:00, the next tick is 04:00 tomorrow, not 04:00 today at
// once. Every scheduler starting later with the same spec reads the same
// spec_since, so none of them makes up the skipped 04:00 either.
//
// # Rolling deploys
//
// While old and new definitions of a schedule run side by side, each
// scheduler fires the ticks of its own spec, and every tick goes through
// the one conditional UPDATE of the row above: whichever definition
// records tick T first makes its job, the other finds last_tick at or past
// T and makes none. So each tick makes at most one job per schedule; a
// tick that only the old spec has (03:00, while the new one says 04:00) is
// made if an old scheduler still runs at 03:00. The stored definition is
// that of the scheduler that stored it last.
//
// # Seen, stale, delete and prune
//
// A running Scheduler stores its definitions again every [SeenInterval]
// (5 minutes), which sets the row's seen_at. A schedule whose seen_at is
// older than [StaleAfter] (1 hour) is one that no running scheduler
// defines: `dbq schedules list` and the dashboard mark it stale, and
// [queue.Queue.PruneSchedules] (`dbq schedules prune --older-than D`,
// default 24 h) removes those not seen for D. [queue.Queue.DeleteSchedule]
// (`dbq schedules delete NAME`, the dashboard's Delete) removes one at
// once; a scheduler that still runs it stores it again within
// SeenInterval, unpaused and starting from that moment, so remove it from
// the code or crontab first. seen_at is on the schedulers' clocks, as the
// ticks are; clocks a few seconds apart do not matter at these scales.
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
// The table's rows show each schedule's spec, zone, last and next tick,
// paused flag and when it was last seen: `dbq schedules list`, pause,
// resume, delete and prune read and set them.
//
// # Crontab files
//
// [ParseCrontab] reads `dbq schedule --file` and `dbq work --schedule`
// files by a fixed rule ([CrontabSyntax]): leading OPTION=VALUE words
// (name=, kind=, CRON_TZ=, seconds=), then exactly five cron fields or one
// @ descriptor (@every takes its duration as a second word), then the
// queue, then the payload, the rest of the line. Nothing is guessed from
// what a word looks like, so a queue may be called monitoring, sat-jobs or
// 0queue, and a seconds field is written seconds=FIELD. Day of week 7 is
// Sunday, as 0 is.
package schedule
