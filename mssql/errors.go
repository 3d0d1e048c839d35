package mssql

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	mssqldb "github.com/microsoft/go-mssqldb"
)

// SQL Server error numbers the dialect acts on.
const (
	errInvalidColumn = 207 // Invalid column name: the tables predate a version (00005's kind)
	errInvalidObject = 208 // Invalid object name: the tables are not there
	// errBabelfish is the number Babelfish for PostgreSQL gives a
	// PostgreSQL error that has no SQL Server number; SQL Server never
	// sends it.
	errBabelfish   = 33557097
	errDeadlock    = 1205 // chosen as deadlock victim
	errLockTimeout = 1222 // lock request time out: NOWAIT met a locked row
	errDupIndex    = 2601 // duplicate key row in a unique index
	errDupKey      = 2627 // violation of a PRIMARY KEY or UNIQUE constraint
)

// serverErrors returns every SQL Server error err carries: go-mssqldb
// reports the last error of a request and lists them all, first to last,
// in All, so the one that matters (1222 before "3621 The statement has been
// terminated", say) need not be the last. mssql.Error is a value type.
func serverErrors(err error) []mssqldb.Error {
	var e mssqldb.Error
	if !errors.As(err, &e) {
		return nil
	}
	if len(e.All) == 0 {
		return []mssqldb.Error{e}
	}
	return e.All
}

// hasNumber reports whether err carries a server error numbered one of nums.
func hasNumber(err error, nums ...int32) bool {
	for _, e := range serverErrors(err) {
		for _, n := range nums {
			if e.Number == n {
				return true
			}
		}
	}
	return false
}

// isConflict reports whether err says the statement lost a race for a row
// lock (1222) or a deadlock (1205): it was rolled back and may simply run
// again.
// On Babelfish for PostgreSQL the same two come as errBabelfish with
// PostgreSQL's message.
func isConflict(err error) bool {
	return hasNumber(err, errLockTimeout, errDeadlock) || babelfishMatch(err, babelfishConflictRe)
}

// classify turns a driver error from operation op into the dialect's
// error: queue.ErrNotMigrated for a missing table or column, a
// *dialect.RetryableError for a lock conflict or deadlock,
// queue.ErrDuplicate for a duplicate key in the dedupe table named dedupe,
// and a plain "dbq: op: ..." otherwise. The driver's error stays wrapped.
func classify(op, dedupe string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case hasNumber(err, errInvalidObject, errInvalidColumn) || babelfishMissing(err):
		return fmt.Errorf("%w (%s: %w)", queue.ErrNotMigrated, op, err)
	case isConflict(err):
		return &dialect.RetryableError{Err: fmt.Errorf("%s: %w", op, err)}
	case isDuplicate(err, dedupe):
		return fmt.Errorf("%w (%s: %w)", queue.ErrDuplicate, op, err)
	}
	return fmt.Errorf("dbq: %s: %w", op, err)
}

// babelfishMissing reports whether err is Babelfish for PostgreSQL's
// report of a missing table or column: a PostgreSQL error it gives no SQL
// Server number (errBabelfish) instead of 208 or 207.
func babelfishMissing(err error) bool { return babelfishMatch(err, babelfishMissingRe) }

// babelfishMatch reports whether err holds an errBabelfish whose message
// re matches.
func babelfishMatch(err error, re *regexp.Regexp) bool {
	for _, e := range serverErrors(err) {
		if e.Number == errBabelfish && re.MatchString(e.Message) {
			return true
		}
	}
	return false
}

var (
	babelfishMissingRe = regexp.MustCompile(`^(relation|column) "[^"]*" does not exist`)
	// "tuple concurrently updated": PostgreSQL's catalog race, which
	// Babelfish met under concurrent claims and enqueues (their table
	// variables are temporary tables); the statement failed and can run again.
	babelfishConflictRe = regexp.MustCompile(`^(canceling statement due to lock timeout|deadlock detected|tuple concurrently updated)`)
)

func isDuplicate(err error, dedupe string) bool {
	for _, e := range serverErrors(err) {
		if (e.Number == errDupIndex || e.Number == errDupKey) && strings.Contains(e.Message, dedupe) {
			return true
		}
	}
	return false
}

// pauseFunc waits before run attempt+1 of a statement that lost a lock
// race; it returns ctx's error if ctx ends first.
type pauseFunc func(ctx context.Context, attempt int) error

// jitterPause waits a random 1 to 5·attempt milliseconds, at most 50: long
// enough for the claimer that holds the row to finish its statement, short
// enough not to matter, and random so colliding claimers do not collide
// again.
func jitterPause(ctx context.Context, attempt int) error {
	d := time.Duration(1+rand.IntN(min(5*attempt, 50))) * time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryConflicts runs once until it succeeds, fails with anything but a
// lock conflict or deadlock, or has run attempts times, pausing between
// runs. Each run is a new statement and so a new random pick. It returns
// the last error as is, together with how many runs were made.
func retryConflicts[T any](ctx context.Context, attempts int, pause pauseFunc, once func(context.Context) (T, error)) (T, int, error) {
	for i := 1; ; i++ {
		v, err := once(ctx)
		if err == nil || !isConflict(err) || i >= attempts {
			if err != nil && isConflict(err) {
				err = fmt.Errorf("gave up after %d attempts: %w", i, err)
			}
			return v, i, err
		}
		if perr := pause(ctx, i); perr != nil {
			var zero T
			return zero, i, perr
		}
	}
}
