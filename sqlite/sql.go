package sqlite

import (
	"embed"
	"fmt"
	"strings"

	"github.com/dbqueue/dbq/dialect"
)

// The statements live in sql/, one file per statement with the same file
// names as the other dialects, and those of package move in sql/move/.
// dialect.LoadSQL renders them: the validated, quoted table names are the
// only text spliced in; every value is a bind parameter.
//
//go:embed sql/*.sql sql/move/*.sql
var sqlFiles embed.FS

// statements holds the rendered SQL for one set of table names.
type statements struct {
	claim, complete, retry, release, extend, rescue, stats, countQueues *stmt

	// Admin statements (admin.go).
	findUnique, jobs, jobsDead, cancel, retryDead, setPaused, paused, statsByKind *stmt
	// Schedules (schedule.go).
	scheduleUpsert, scheduleAdvance, scheduleList, scheduleSetPaused, scheduleDelete *stmt
	// Activity (activity.go).
	activityAdd, activity, activityPrune, processTouch, processRemove, processPrune, processes *stmt
	// enqueueUnique is the one-job INSERT that skips a dedupe collision.
	enqueueUnique *stmt

	// enqueuePow2[k] inserts 1<<k jobs and enqueueFull a full chunk: the
	// sizes kept prepared (see enqueue). files renders any other size.
	enqueuePow2 [enqueuePow2Sizes]*stmt
	enqueueFull *stmt
	files       *dialect.SQLFiles

	// journalMode reads the journal mode (Open).
	journalMode string
	// move holds the statements of package move (move.go), run as text.
	move struct {
		identity, survey, take, export, delete, insert, stored string
	}
}

func loadStatements(names dialect.Names) (*statements, error) {
	files, err := dialect.LoadSQL(sqlFiles, "sql/*.sql", dialect.SQLite, names, dialect.SQLOptions{})
	if err != nil {
		return nil, err
	}
	moveFiles, err := dialect.LoadSQL(sqlFiles, "sql/move/*.sql", dialect.SQLite, names, dialect.SQLOptions{})
	if err != nil {
		return nil, err
	}
	s := &statements{files: files}
	texts := map[string]*string{"journal_mode": &s.journalMode}
	for name, dst := range map[string]**stmt{
		"claim":    &s.claim,
		"complete": &s.complete,
		"retry":    &s.retry,
		"release":  &s.release,
		"extend":   &s.extend,
		"rescue":   &s.rescue,
		"stats":    &s.stats,

		"count_queues": &s.countQueues,

		"enqueue_unique": &s.enqueueUnique,
		"find_unique":    &s.findUnique,
		"jobs":           &s.jobs,
		"jobs_dead":      &s.jobsDead,
		"cancel":         &s.cancel,
		"retry_dead":     &s.retryDead,
		"set_paused":     &s.setPaused,
		"paused":         &s.paused,
		"stats_by_kind":  &s.statsByKind,

		"schedule_upsert":     &s.scheduleUpsert,
		"schedule_advance":    &s.scheduleAdvance,
		"schedules":           &s.scheduleList,
		"schedule_set_paused": &s.scheduleSetPaused,
		"schedule_delete":     &s.scheduleDelete,

		"activity_add":   &s.activityAdd,
		"activity":       &s.activity,
		"activity_prune": &s.activityPrune,
		"process_touch":  &s.processTouch,
		"process_remove": &s.processRemove,
		"process_prune":  &s.processPrune,
		"processes":      &s.processes,
	} {
		*dst = &stmt{}
		texts[name] = &(*dst).text
	}
	if err := files.Text(texts); err != nil {
		return nil, err
	}
	m := &s.move
	if err := moveFiles.Text(map[string]*string{"identity": &m.identity, "survey": &m.survey, "take": &m.take,
		"export": &m.export, "delete": &m.delete, "insert": &m.insert, "stored": &m.stored}); err != nil {
		return nil, err
	}
	if err := s.prepareEnqueue(); err != nil {
		return nil, err
	}
	return s, nil
}

// prepareEnqueue renders the INSERTs of the sizes kept prepared.
func (s *statements) prepareEnqueue() error {
	one, err := s.files.Render("enqueue", enqueueData{N: 1})
	if err != nil {
		return err
	}
	if n := strings.Count(one, "?"); n != enqueueRowParams {
		return fmt.Errorf("dbq: sqlite: enqueue.sql: a row has %d parameters, want %d", n, enqueueRowParams)
	}
	for k := range s.enqueuePow2 {
		text, err := s.files.Render("enqueue", enqueueData{N: 1 << k})
		if err != nil {
			return err
		}
		s.enqueuePow2[k] = &stmt{text: text}
	}
	text, err := s.files.Render("enqueue", enqueueData{N: enqueueChunk})
	if err != nil {
		return err
	}
	s.enqueueFull = &stmt{text: text}
	return nil
}

func (s *statements) close() {
	for _, st := range []*stmt{s.claim, s.complete, s.retry, s.release, s.extend, s.rescue, s.stats, s.countQueues, s.enqueueFull,
		s.findUnique, s.jobs, s.jobsDead, s.cancel, s.retryDead, s.setPaused, s.paused, s.statsByKind,
		s.enqueueUnique, s.scheduleUpsert, s.scheduleAdvance, s.scheduleList, s.scheduleSetPaused, s.scheduleDelete} {
		st.close()
	}
	for _, st := range s.enqueuePow2 {
		st.close()
	}
}
