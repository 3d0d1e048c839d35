package postgres

import (
	"embed"
	"text/template"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

// The statements live in sql/ (those of package move in sql/move/), one
// file per statement, rendered by dialect.LoadSQL: the validated, quoted,
// qualified table names and the notification channel are the only text
// ever put in. Every value is a bind parameter.
//
//go:embed sql/*.sql sql/move/*.sql
var sqlFiles embed.FS

// statements holds the rendered SQL for one jobs table.
type statements struct {
	table  string // the quoted, qualified table name
	queues string // the quoted, qualified queues (pause) table name
	// channel is the table's NOTIFY channel (waker.go).
	channel string

	enqueue, stats, queueNames, countQueue, statsByKind, namespace, backendPID, listen string

	// plan: the planner settings the hot statements run after (plan.sql).
	plan string

	// Advisory strategy.
	claimAdvisory, postcheck, completeAdvisory, retryAdvisory string
	unlock, unlockCompleted, unlockAll, heldLocks, session    string

	// SKIP LOCKED strategy.
	claimSkipLocked, completeSkipLocked, retrySkipLocked string
	release, extend, rescue                              string
	rescueKey                                            int64 // rescue.sql's advisory lock key

	// Admin. jobs has one statement per filter (jobs.sql).
	jobs                                          map[jobsFilter]string
	enqueueUnique, dedupeExisting, cancel         string
	retryDeadIDs, retryDeadAll, setPaused, paused string

	// Schedules (schedule.go).
	scheduleUpsert, scheduleAdvance, scheduleList, scheduleSetPaused, scheduleDelete string

	// Health (health.go).
	healthHolders, healthTable string
	// Activity (activity.go).
	activityAdd, activity, activityPrune                 string
	processTouch, processRemove, processPrune, processes string
}

// jobsFilter is jobs.sql's data: a queue filter or not, a kind filter or
// not, and the state filtered on ("" for none).
type jobsFilter struct {
	Queue bool
	Kind  bool
	State queue.State
}

// KindParam is the number of the kind's parameter in jobs.sql: it follows
// the queue's when there is one.
func (f jobsFilter) KindParam() int {
	if f.Queue {
		return 4
	}
	return 3
}

// jobsStates are the states jobs.sql filters on.
var jobsStates = []queue.State{"", queue.StateDead, queue.StateReady, queue.StateClaimed}

// moveStatements holds the rendered SQL of package move (move.go).
type moveStatements struct {
	identity, address, survey, export, delete, insert, stored, notify string
}

func loadStatements(names dialect.Names) (*statements, error) {
	if err := names.Validate(); err != nil {
		return nil, err
	}
	names = names.WithDefaults()
	s := &statements{
		table:  names.Qualified(dialect.Postgres, names.Jobs()),
		queues: names.Qualified(dialect.Postgres, names.Prefix+"queues"),
		jobs:   map[jobsFilter]string{},
	}
	s.channel = channelName(s.table)
	s.rescueKey = tableKey("rescue", s.table)
	files, err := dialect.LoadSQL(sqlFiles, "sql/*.sql", dialect.Postgres, names, dialect.SQLOptions{
		Funcs: template.FuncMap{"channel": func() string { return dialect.Quote(dialect.Postgres, s.channel) }},
	})
	if err != nil {
		return nil, err
	}
	for _, byQueue := range []bool{false, true} {
		for _, byKind := range []bool{false, true} {
			for _, state := range jobsStates {
				f := jobsFilter{Queue: byQueue, Kind: byKind, State: state}
				if s.jobs[f], err = files.Render("jobs", f); err != nil {
					return nil, err
				}
			}
		}
	}
	err = files.Text(map[string]*string{
		"enqueue":             &s.enqueue,
		"stats":               &s.stats,
		"stats_by_kind":       &s.statsByKind,
		"queue_names":         &s.queueNames,
		"count_queue":         &s.countQueue,
		"namespace":           &s.namespace,
		"backend_pid":         &s.backendPID,
		"listen":              &s.listen,
		"claim_advisory":      &s.claimAdvisory,
		"plan":                &s.plan,
		"postcheck":           &s.postcheck,
		"complete_advisory":   &s.completeAdvisory,
		"retry_advisory":      &s.retryAdvisory,
		"unlock":              &s.unlock,
		"unlock_completed":    &s.unlockCompleted,
		"unlock_all":          &s.unlockAll,
		"held_locks":          &s.heldLocks,
		"session":             &s.session,
		"claim_skiplocked":    &s.claimSkipLocked,
		"complete_skiplocked": &s.completeSkipLocked,
		"retry_skiplocked":    &s.retrySkipLocked,
		"release":             &s.release,
		"extend":              &s.extend,
		"rescue":              &s.rescue,
		"enqueue_unique":      &s.enqueueUnique,
		"dedupe_existing":     &s.dedupeExisting,
		"cancel":              &s.cancel,
		"retry_dead_ids":      &s.retryDeadIDs,
		"retry_dead_all":      &s.retryDeadAll,
		"set_paused":          &s.setPaused,
		"paused":              &s.paused,
		"schedule_upsert":     &s.scheduleUpsert,
		"schedule_advance":    &s.scheduleAdvance,
		"schedules":           &s.scheduleList,
		"schedule_set_paused": &s.scheduleSetPaused,
		"schedule_delete":     &s.scheduleDelete,
		"health_holders":      &s.healthHolders,
		"health_table":        &s.healthTable,
		"activity_add":        &s.activityAdd,
		"activity":            &s.activity,
		"activity_prune":      &s.activityPrune,
		"process_touch":       &s.processTouch,
		"process_remove":      &s.processRemove,
		"process_prune":       &s.processPrune,
		"processes":           &s.processes,
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func loadMoveStatements(names dialect.Names) (*moveStatements, error) {
	files, err := dialect.LoadSQL(sqlFiles, "sql/move/*.sql", dialect.Postgres, names, dialect.SQLOptions{})
	if err != nil {
		return nil, err
	}
	m := &moveStatements{}
	err = files.Text(map[string]*string{
		"identity": &m.identity,
		"address":  &m.address,
		"survey":   &m.survey,
		"export":   &m.export,
		"delete":   &m.delete,
		"insert":   &m.insert,
		"stored":   &m.stored,
		"notify":   &m.notify,
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}
