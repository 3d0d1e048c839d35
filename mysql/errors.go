package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	mysqldrv "github.com/go-sql-driver/mysql"
)

// Server error numbers the dialect acts on.
const (
	erDupEntry        = 1062 // ER_DUP_ENTRY: a dedupe key collided
	erNoSuchTable     = 1146 // ER_NO_SUCH_TABLE: not migrated
	erKeyDoesNotExist = 1176 // ER_KEY_DOES_NOT_EXITS: FORCE INDEX names a missing index
	erBadDB           = 1049 // ER_BAD_DB_ERROR: the configured schema does not exist
	erLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT; also MariaDB's NOWAIT
	erLockDeadlock    = 1213 // ER_LOCK_DEADLOCK: the whole transaction was rolled back
	erCheckRead       = 1020 // ER_CHECKREAD: MariaDB innodb_snapshot_isolation
	erLockNowait      = 3572 // ER_LOCK_NOWAIT: MySQL 8's NOWAIT
	erUserLockDL      = 3058 // ER_USER_LOCK_DEADLOCK: MySQL 8's GET_LOCK deadlock
	erQueryKilled     = 1317 // ER_QUERY_INTERRUPTED
	erConnKilled      = 1927 // ER_CONNECTION_KILLED (MariaDB)
	erNotSupportedYet = 1235 // ER_NOT_SUPPORTED_YET: e.g. GET_LOCK on Galera
	erUnknown         = 1105 // ER_UNKNOWN_ERROR: TiDB's catch-all, see tidbPessimisticRetry
	erTiDBConflict    = 9007 // TiDB ErrWriteConflict: an optimistic transaction lost a race
	erWsrepNotReady   = 1047 // ER_UNKNOWN_COM_ERROR: "WSREP has not yet prepared node for application use"
)

// wsrepConflict is how a Galera node words a transaction that a replicated
// write set aborted ("WSREP detected deadlock/conflict and aborted the
// transaction"), whatever error number carries it.
const wsrepConflict = "wsrep detected deadlock/conflict"

// isConflict reports a Galera certification conflict: a claim on this node
// took rows that a claim on another node committed first, so certification
// (at COMMIT) or the replicated write (earlier, a brute-force abort) rolled
// this one back. On a Galera node that is error 1213, "Deadlock found", as
// for an InnoDB deadlock, which a claim treats the same way; some builds
// say "WSREP detected deadlock/conflict" instead. It is an expected, cheap
// retry: nothing was claimed, and another look finds other rows.
func isConflict(err error, galera bool) bool {
	var me *mysqldrv.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	if strings.Contains(strings.ToLower(me.Message), wsrepConflict) {
		return true
	}
	return galera && me.Number == erLockDeadlock
}

// tidbPessimisticRetry is the message of TiDB's error 1105 when a
// pessimistic statement kept meeting newer writes ("pessimistic lock retry
// limit reached"): two claimers went for the same rows. Like 9007 it is a
// cheap, expected retry in a claim.
const tidbPessimisticRetry = "pessimistic lock retry limit reached"

// classify turns a driver error into the dbq error a caller can act on:
// ErrNotMigrated for a missing table or index, a *dialect.RetryableError
// for a deadlock, a lock timeout or TiDB's write conflicts, the error
// itself otherwise (wrapped with what was being done). ErrDuplicate is the
// enqueue path's own business.
func (d *Driver) classify(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var me *mysqldrv.MySQLError
	if errors.As(err, &me) {
		if isConflict(err, d.server.Galera) {
			return &dialect.RetryableError{Err: fmt.Errorf("mysql %s: %w", what, err)}
		}
		switch me.Number {
		case erNoSuchTable, erKeyDoesNotExist, erBadDB:
			return fmt.Errorf("%w (%s: table %s: %s)", queue.ErrNotMigrated, what, d.stmts.jobsTable, me.Message)
		case erLockWaitTimeout, erLockDeadlock, erCheckRead, erLockNowait, erUserLockDL, erTiDBConflict:
			return &dialect.RetryableError{Err: fmt.Errorf("mysql %s: %w", what, err)}
		case erWsrepNotReady:
			// A Galera node out of the primary component (or still joining)
			// refuses queries until it is back: a retry, with backoff.
			return &dialect.RetryableError{Err: fmt.Errorf("mysql %s: %w", what, err)}
		case erUnknown:
			if strings.Contains(me.Message, tidbPessimisticRetry) {
				return &dialect.RetryableError{Err: fmt.Errorf("mysql %s: %w", what, err)}
			}
		}
	}
	return fmt.Errorf("dbq: mysql %s: %w", what, err)
}

// isDuplicate reports a unique-key collision.
func isDuplicate(err error) bool {
	var me *mysqldrv.MySQLError
	return errors.As(err, &me) && me.Number == erDupEntry
}

// isBadConn reports an error after which a connection is unusable.
func isBadConn(err error) bool {
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysqldrv.ErrInvalidConn) ||
		errors.Is(err, sql.ErrConnDone) {
		return true
	}
	var me *mysqldrv.MySQLError
	return errors.As(err, &me) && (me.Number == erConnKilled || me.Number == erQueryKilled)
}

// ErrPoolTooSmall: the *sql.DB's SetMaxOpenConns leaves no connection for
// Complete, Retry, Release and Extend once every Claimer of the Driver
// holds its own. It wraps queue.ErrInvalidConfig.
var ErrPoolTooSmall = fmt.Errorf("%w: mysql: connection pool too small", queue.ErrInvalidConfig)
