package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"math/bits"
	"strings"
	"sync"

	"github.com/dbqueue/dbq/dialect"
)

// The statements live in sql/, one file per statement, with the same file
// names as the other dialects. {{jobs}} marks the jobs table; it is replaced
// by the validated, quoted name and is the only text ever spliced in.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

// {{queues}} marks the queues table (pause flags) the same way.
const (
	tableMarker     = "{{jobs}}"
	queuesMarker    = "{{queues}}"
	schedulesMarker = "{{schedules}}"
)

// enqueueRowParams is the number of bind parameters per enqueued job.
const enqueueRowParams = 7

// stmt is one statement's text and, once first used, its *sql.Stmt on the
// driver's *sql.DB, which database/sql keeps prepared per connection:
// parsing a statement costs more than running it.
type stmt struct {
	text  string
	adhoc bool // used once: run the text, keep nothing prepared

	mu   sync.Mutex
	prep *sql.Stmt
}

// prepared returns the statement prepared on db. A failure (the table is
// not there yet) is not kept, so the next call tries again.
func (s *stmt) prepared(ctx context.Context, db *sql.DB) (*sql.Stmt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prep != nil {
		return s.prep, nil
	}
	p, err := db.PrepareContext(ctx, s.text)
	if err != nil {
		return nil, interpret(err)
	}
	s.prep = p
	return p, nil
}

func (s *stmt) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prep != nil {
		_ = s.prep.Close()
		s.prep = nil
	}
}

// statements holds the rendered SQL for one jobs table.
type statements struct {
	claim, complete, retry, release, extend, rescue, stats *stmt

	// Admin statements (admin.go).
	findUnique, jobs, jobsDead, cancel, retryDead, setPaused, paused *stmt
	// Schedules (schedule.go).
	scheduleUpsert, scheduleAdvance, scheduleList, scheduleSetPaused *stmt
	// enqueueUnique is the one-job INSERT that skips a dedupe collision.
	enqueueUnique *stmt

	// enqueueHead + n × enqueueRow (comma-separated) + enqueueTail inserts
	// n jobs.
	enqueueHead, enqueueRow, enqueueTail string
	// enqueuePow2[k] inserts 1<<k jobs and enqueueFull a full chunk: the
	// sizes kept prepared. insert splits any other batch into these, since
	// parsing a VALUES list of n rows costs more than running it.
	enqueuePow2 [enqueuePow2Sizes]*stmt
	enqueueFull *stmt
}

func loadStatements(names dialect.Names) (*statements, error) {
	table := names.Qualified(dialect.SQLite, names.Jobs())
	queues := names.Qualified(dialect.SQLite, names.WithDefaults().Prefix+"queues")
	schedules := names.Qualified(dialect.SQLite, names.WithDefaults().Prefix+"schedules")
	read := func(name string) (string, error) {
		b, err := sqlFiles.ReadFile("sql/" + name + ".sql")
		if err != nil {
			return "", fmt.Errorf("dbq: sqlite: statement %s: %w", name, err)
		}
		return strings.NewReplacer(tableMarker, table, queuesMarker, queues, schedulesMarker, schedules).Replace(string(b)), nil
	}
	s := &statements{}
	for name, dst := range map[string]**stmt{
		"claim":    &s.claim,
		"complete": &s.complete,
		"retry":    &s.retry,
		"release":  &s.release,
		"extend":   &s.extend,
		"rescue":   &s.rescue,
		"stats":    &s.stats,

		"find_unique": &s.findUnique,
		"jobs":        &s.jobs,
		"jobs_dead":   &s.jobsDead,
		"cancel":      &s.cancel,
		"retry_dead":  &s.retryDead,
		"set_paused":  &s.setPaused,
		"paused":      &s.paused,

		"schedule_upsert":     &s.scheduleUpsert,
		"schedule_advance":    &s.scheduleAdvance,
		"schedules":           &s.scheduleList,
		"schedule_set_paused": &s.scheduleSetPaused,
	} {
		text, err := read(name)
		if err != nil {
			return nil, err
		}
		*dst = &stmt{text: text}
	}
	enq, err := read("enqueue")
	if err != nil {
		return nil, err
	}
	head, rest, ok1 := strings.Cut(enq, "{{row}}")
	row, tail, ok2 := strings.Cut(rest, "{{/row}}")
	if !ok1 || !ok2 || strings.Contains(tail, "{{row}}") || strings.Count(row, "?") != enqueueRowParams {
		return nil, fmt.Errorf("dbq: sqlite: enqueue.sql: want one {{row}}…{{/row}} tuple of %d parameters", enqueueRowParams)
	}
	s.enqueueHead, s.enqueueRow, s.enqueueTail = head, row, tail
	for k := range s.enqueuePow2 {
		s.enqueuePow2[k] = &stmt{text: s.enqueueText(1 << k)}
	}
	s.enqueueFull = &stmt{text: s.enqueueText(enqueueChunk)}
	// VALUES, not SELECT, precedes the upsert clause, so SQLite parses it
	// without the ambiguity its docs warn of.
	s.enqueueUnique = &stmt{text: head + row + "\nON CONFLICT DO NOTHING" + tail}
	return s, nil
}

// enqueuePow2Sizes is how many power-of-two INSERTs are kept prepared:
// 1, 2, 4, … 256 jobs, the largest below enqueueChunk.
const enqueuePow2Sizes = 9

// enqueue returns the INSERT for n jobs: prepared for a full chunk and for
// powers of two (see enqueueSplit), ad hoc otherwise.
func (s *statements) enqueue(n int) *stmt {
	if n == enqueueChunk {
		return s.enqueueFull
	}
	if n > 0 && n&(n-1) == 0 && n < 1<<enqueuePow2Sizes {
		return s.enqueuePow2[bits.TrailingZeros(uint(n))]
	}
	return &stmt{text: s.enqueueText(n), adhoc: true}
}

// enqueueSplit returns the sizes of the INSERTs that carry n jobs (n at
// most enqueueChunk), largest first, each kept prepared: n itself for a
// full chunk, else its binary digits — at most enqueuePow2Sizes statements
// instead of parsing a new one for every batch size.
func enqueueSplit(n int) []int {
	if n == enqueueChunk {
		return []int{n}
	}
	var out []int
	for k := enqueuePow2Sizes - 1; k >= 0; k-- {
		if n&(1<<k) != 0 {
			out = append(out, 1<<k)
		}
	}
	return out
}

func (s *statements) enqueueText(n int) string {
	var b strings.Builder
	b.Grow(len(s.enqueueHead) + n*(len(s.enqueueRow)+2) + len(s.enqueueTail))
	b.WriteString(s.enqueueHead)
	for i := range n {
		if i > 0 {
			b.WriteString(",\n       ")
		}
		b.WriteString(s.enqueueRow)
	}
	b.WriteString(s.enqueueTail)
	return b.String()
}

func (s *statements) close() {
	for _, st := range []*stmt{s.claim, s.complete, s.retry, s.release, s.extend, s.rescue, s.stats, s.enqueueFull,
		s.findUnique, s.jobs, s.cancel, s.retryDead, s.setPaused, s.paused, s.enqueueUnique,
		s.scheduleUpsert, s.scheduleAdvance, s.scheduleList, s.scheduleSetPaused} {
		st.close()
	}
	for _, st := range s.enqueuePow2 {
		st.close()
	}
}
