package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// interpret maps a driver error to dbq's classes, keeping the original for
// errors.As: SQLITE_BUSY and SQLITE_LOCKED are retryable, a unique-index
// violation is ErrDuplicate (the dedupe index is the table's only unique
// one besides the primary key, which dbq never sets), a missing table is
// ErrNotMigrated, a closed *sql.DB is ErrClosed.
func interpret(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return &dialect.RetryableError{Err: err}
		case sqlite3.SQLITE_CONSTRAINT:
			if se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE {
				return fmt.Errorf("%w: %w", queue.ErrDuplicate, err)
			}
		case sqlite3.SQLITE_ERROR:
			if strings.Contains(se.Error(), "no such table") {
				return fmt.Errorf("%w: %w", queue.ErrNotMigrated, err)
			}
		}
	}
	switch err.Error() { // database/sql's unexported errors
	case "sql: database is closed", "sql: statement is closed":
		return fmt.Errorf("%w: %w", queue.ErrClosed, err)
	}
	if strings.HasPrefix(err.Error(), "dbq:") {
		return err
	}
	return fmt.Errorf("dbq: sqlite: %w", err)
}
