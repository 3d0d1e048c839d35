package postgres

import (
	"embed"
	"fmt"
	"strings"

	"github.com/dbqueue/dbq/dialect"
)

// The statements live in sql/, one file per statement. {{jobs}} marks the
// jobs table; it is replaced by the validated, quoted, qualified name and is
// the only text ever spliced in. Every value is a bind parameter.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

const tableMarker = "{{jobs}}"

// statements holds the rendered SQL for one jobs table.
type statements struct {
	table string // the quoted, qualified table name

	enqueue, stats, namespace string

	// Advisory strategy.
	claimAdvisory, postcheck, completeAdvisory, retryAdvisory string
	unlock, unlockAll, heldLocks                              string

	// SKIP LOCKED strategy.
	claimSkipLocked, completeSkipLocked, retrySkipLocked string
	release, extend, rescue                              string
}

func loadStatements(names dialect.Names) (*statements, error) {
	if err := names.Validate(); err != nil {
		return nil, err
	}
	names = names.WithDefaults()
	s := &statements{table: names.Qualified(dialect.Postgres, names.Jobs())}
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
		"claim_skiplocked":    &s.claimSkipLocked,
		"complete_skiplocked": &s.completeSkipLocked,
		"retry_skiplocked":    &s.retrySkipLocked,
		"release":             &s.release,
		"extend":              &s.extend,
		"rescue":              &s.rescue,
	} {
		b, err := sqlFiles.ReadFile("sql/" + file + ".sql")
		if err != nil {
			return nil, fmt.Errorf("dbq: postgres: statement %s: %w", file, err)
		}
		*dst = strings.ReplaceAll(string(b), tableMarker, s.table)
	}
	return s, nil
}
