package postgres

import (
	"embed"
	"fmt"
	"strings"

	"github.com/dbqueue/dbq/dialect"
)

// The statements live in sql/, one file per statement. {{jobs}} marks the
// jobs table and {{queues}} the pause table; they are replaced by the
// validated, quoted, qualified names and are the only text ever spliced in. Every value is a bind parameter.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

const (
	tableMarker     = "{{jobs}}"
	queuesMarker    = "{{queues}}"
	schedulesMarker = "{{schedules}}"
)

// statements holds the rendered SQL for one jobs table.
type statements struct {
	table  string // the quoted, qualified table name
	queues string // the quoted, qualified queues (pause) table name
	// channel is the table's NOTIFY channel (waker.go).
	channel string

	enqueue, stats, namespace string

	// Advisory strategy.
	claimAdvisory, postcheck, completeAdvisory, retryAdvisory string
	unlock, unlockAll, heldLocks, session                     string

	// SKIP LOCKED strategy.
	claimSkipLocked, completeSkipLocked, retrySkipLocked string
	release, extend, rescue                              string
	rescueKey                                            int64 // rescue.sql's advisory lock key

	// Admin.
	enqueueUnique, dedupeExisting, jobs, cancel   string
	retryDeadIDs, retryDeadAll, setPaused, paused string

	// Schedules (schedule.go).
	scheduleUpsert, scheduleAdvance, scheduleList, scheduleSetPaused string
}

func loadStatements(names dialect.Names) (*statements, error) {
	if err := names.Validate(); err != nil {
		return nil, err
	}
	names = names.WithDefaults()
	s := &statements{
		table:  names.Qualified(dialect.Postgres, names.Jobs()),
		queues: names.Qualified(dialect.Postgres, names.Prefix+"queues"),
	}
	schedules := names.Qualified(dialect.Postgres, names.Prefix+"schedules")
	for file, dst := range map[string]*string{
		"enqueue":             &s.enqueue,
		"stats":               &s.stats,
		"namespace":           &s.namespace,
		"claim_advisory":      &s.claimAdvisory,
		"postcheck":           &s.postcheck,
		"complete_advisory":   &s.completeAdvisory,
		"retry_advisory":      &s.retryAdvisory,
		"unlock":              &s.unlock,
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
		"jobs":                &s.jobs,
		"cancel":              &s.cancel,
		"retry_dead_ids":      &s.retryDeadIDs,
		"retry_dead_all":      &s.retryDeadAll,
		"set_paused":          &s.setPaused,
		"paused":              &s.paused,
		"schedule_upsert":     &s.scheduleUpsert,
		"schedule_advance":    &s.scheduleAdvance,
		"schedules":           &s.scheduleList,
		"schedule_set_paused": &s.scheduleSetPaused,
	} {
		b, err := sqlFiles.ReadFile("sql/" + file + ".sql")
		if err != nil {
			return nil, fmt.Errorf("dbq: postgres: statement %s: %w", file, err)
		}
		*dst = strings.NewReplacer(tableMarker, s.table, queuesMarker, s.queues, schedulesMarker, schedules).Replace(string(b))
	}
	s.rescueKey = tableKey("rescue", s.table)
	s.channel = channelName(s.table)
	return s, nil
}
