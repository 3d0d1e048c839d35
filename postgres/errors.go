package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5/pgconn"
)

// PostgreSQL error codes dbq maps to its own errors.
const (
	codeUndefinedTable        = "42P01"
	codeInvalidSchemaName     = "3F000"
	codeUniqueViolation       = "23505"
	codeSerializationFailure  = "40001"
	codeDeadlockDetected      = "40P01"
	codeLockNotAvailable      = "55P03"
	codeQueryCanceled         = "57014"
	codeInsufficientPrivilege = "42501"
	// A value the database encoding cannot hold: a NUL byte or invalid
	// UTF-8 in a text parameter, or a character outside a non-UTF-8
	// database's encoding.
	codeCharacterNotInRepertoire = "22021"
	codeUntranslatableCharacter  = "22P05"
	// A prepared statement that exists, or does not, where pgx expected
	// otherwise: a transaction pooler sent the statement to another server
	// connection than the one it was prepared on.
	codeDuplicatePreparedStatement = "42P05"
	codeInvalidSQLStatementName    = "26000"
	// invalid_text_representation: the session guard's failure (ownSession).
	codeInvalidTextRepresentation = "22P02"
)

// poolerMark is in the message of the session guard's failure (see
// claim_advisory.sql).
const poolerMark = "a transaction pooler is in the way"

// Advice for a transaction pooler between dbq and PostgreSQL.
const (
	adviceAdvisory = "the advisory claimer needs a session of its own, which a transaction pooler " +
		"(such as PgBouncer with pool_mode = transaction) does not keep: use the SKIP LOCKED strategy " +
		"(postgres.Config{Strategy: postgres.SkipLocked}, or dbq --strategy skiplocked) with " +
		"default_query_exec_mode=exec in the DSN and no wake-ups (Config.NoNotify, dbq work --no-wakeups), " +
		"or connect directly or through a session-mode pool"
	advicePrepared = "prepared statements do not survive a transaction pooler (such as PgBouncer with " +
		"pool_mode = transaction): add default_query_exec_mode=exec to the DSN (or run PgBouncer 1.21+ " +
		"with max_prepared_statements), use the SKIP LOCKED strategy (dbq --strategy skiplocked) and no " +
		"wake-ups (dbq work --no-wakeups)"
)

// interpret maps a pgx error to dbq's errors, keeping the original for
// errors.As (*pgconn.PgError): a missing table or schema is
// queue.ErrNotMigrated, a unique violation queue.ErrDuplicate (the dedupe
// index is the table's only unique index besides the primary key, which dbq
// never sets), a text value the database encoding cannot hold (22021,
// 22P05) queue.ErrInvalidJob, a serialization failure, deadlock or lock
// timeout a *dialect.RetryableError. Other errors get a
// "dbq: postgres: op:" prefix.
func interpret(op string, err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeUndefinedTable, codeInvalidSchemaName:
			return fmt.Errorf("%w: %w", queue.ErrNotMigrated, err)
		case codeUniqueViolation:
			return fmt.Errorf("%w: %w", queue.ErrDuplicate, err)
		case codeCharacterNotInRepertoire, codeUntranslatableCharacter:
			// Enqueue checks dedupe keys first; this catches text the
			// check does not foresee, such as a non-UTF-8 database.
			return fmt.Errorf("%w: %w", queue.ErrInvalidJob, err)
		case codeSerializationFailure, codeDeadlockDetected, codeLockNotAvailable:
			return &dialect.RetryableError{Err: err}
		case codeDuplicatePreparedStatement, codeInvalidSQLStatementName:
			return fmt.Errorf("%w: postgres: %s: %s (%w)", queue.ErrUnsupportedServer, op, advicePrepared, err)
		case codeInvalidTextRepresentation:
			if strings.Contains(pgErr.Message, poolerMark) {
				return fmt.Errorf("%w: postgres: %s: %s (%w)", queue.ErrUnsupportedServer, op, adviceAdvisory, err)
			}
		}
	}
	if strings.HasPrefix(err.Error(), "dbq:") {
		return err
	}
	return fmt.Errorf("dbq: postgres: %s: %w", op, err)
}

// isCode reports whether err is a server error with the given SQLSTATE.
func isCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

// ctxErr returns the error for an operation cut off by ctx.
func ctxErr(op string, ctx context.Context) error {
	return fmt.Errorf("dbq: postgres: %s: %w", op, context.Cause(ctx))
}

func failed(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil && (isCode(err, codeQueryCanceled) || errors.Is(err, context.Canceled)) {
		return ctxErr(op, ctx)
	}
	return interpret(op, err)
}
