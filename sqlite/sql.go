package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
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

const tableMarker = "{{jobs}}"

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

	// enqueueHead + n × enqueueRow (comma-separated) + enqueueTail inserts
	// n jobs.
	enqueueHead, enqueueRow, enqueueTail string
	// enqueueOne and enqueueFull are the INSERTs for one job and for a
	// full chunk, the sizes worth keeping prepared.
	enqueueOne, enqueueFull *stmt
}

func loadStatements(names dialect.Names) (*statements, error) {
	table := names.Qualified(dialect.SQLite, names.Jobs())
	read := func(name string) (string, error) {
		b, err := sqlFiles.ReadFile("sql/" + name + ".sql")
		if err != nil {
			return "", fmt.Errorf("dbq: sqlite: statement %s: %w", name, err)
		}
		return strings.ReplaceAll(string(b), tableMarker, table), nil
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
	s.enqueueOne = &stmt{text: s.enqueueText(1)}
	s.enqueueFull = &stmt{text: s.enqueueText(enqueueChunk)}
	return s, nil
}

// enqueue returns the INSERT for n jobs.
func (s *statements) enqueue(n int) *stmt {
	switch n {
	case 1:
		return s.enqueueOne
	case enqueueChunk:
		return s.enqueueFull
	}
	return &stmt{text: s.enqueueText(n), adhoc: true}
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
	for _, st := range []*stmt{s.claim, s.complete, s.retry, s.release, s.extend, s.rescue, s.stats, s.enqueueOne, s.enqueueFull} {
		st.close()
	}
}
