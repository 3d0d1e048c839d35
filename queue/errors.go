package queue

import (
	"errors"
	"fmt"

	"github.com/dbqueue/dbq/dialect"
)

// Sentinel errors. Test for them with errors.Is; every error dbq returns
// starts with "dbq:" and never holds a DSN password.
var (
	// ErrLeaseLost: the claim named by a lease is no longer this holder's
	// (the lease expired and the job was re-claimed, completed or released,
	// or the claimer's connection and with it its locks are gone). Nothing
	// was changed for that job.
	ErrLeaseLost = errors.New("dbq: lease lost")
	// ErrNotMigrated: the jobs table does not exist.
	ErrNotMigrated = errors.New("dbq: schema not migrated; run `dbq migrate up`")
	// ErrInvalidLimit: Claim was asked for n <= 0 jobs.
	ErrInvalidLimit = errors.New("dbq: claim limit must be positive")
	// ErrPayloadTooLarge: a payload exceeds Config.MaxPayloadBytes.
	ErrPayloadTooLarge = errors.New("dbq: payload too large")
	// ErrClosed: the Queue or Claimer was closed.
	ErrClosed = errors.New("dbq: closed")
	// ErrDuplicate: a job with the same queue and dedupe key is stored.
	ErrDuplicate = errors.New("dbq: duplicate dedupe key")
	// ErrUnsupportedTx: EnqueueTx got a transaction type the dialect
	// cannot use.
	ErrUnsupportedTx = errors.New("dbq: unsupported transaction type")
	// ErrInvalidJob: a NewJob or RetryParams field is out of range.
	ErrInvalidJob = errors.New("dbq: invalid job")
	// ErrInvalidConfig: a Config field is out of range.
	ErrInvalidConfig = dialect.ErrInvalidConfig
	// ErrUnsupportedServer: the database, or what stands between dbq and
	// it (a transaction pooler), cannot keep the claim's promise; the
	// message says what to change. Workers stop on it rather than retry.
	ErrUnsupportedServer = errors.New("dbq: unsupported server")

	// ErrInvalidQueue: a queue name is empty, too long or has characters
	// outside [A-Za-z0-9_.:-].
	ErrInvalidQueue = dialect.ErrInvalidQueue
	// ErrInvalidIdentifier: a schema or prefix is not a plain identifier.
	ErrInvalidIdentifier = dialect.ErrInvalidIdentifier
	// ErrUnknownScheme: a DSN's scheme names no dialect.
	ErrUnknownScheme = dialect.ErrUnknownScheme
	// ErrBadDSN: a DSN in a form dbq knows that it cannot read (a URL
	// whose password is not URL-escaped, a URL mixed with a driver's form);
	// see dialect.DSNError. It comes with ErrInvalidConfig.
	ErrBadDSN = dialect.ErrBadDSN
)

// LeaseLostError lists the jobs of a batch whose leases were lost. The
// other leases of the batch took effect. It matches ErrLeaseLost.
type LeaseLostError struct {
	IDs []int64
}

func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("dbq: lease lost for %d job(s): %v", len(e.IDs), e.IDs)
}

// Is reports whether target is ErrLeaseLost.
func (e *LeaseLostError) Is(target error) bool { return target == ErrLeaseLost }

// LostLeases returns the error for the leases in want that were not among
// the IDs that took effect, or nil when all took effect. Dialects use it to
// turn a statement's affected IDs into the batch result.
func LostLeases(want []Lease, done []int64) error {
	if len(done) == len(want) {
		return nil
	}
	ok := make(map[int64]struct{}, len(done))
	for _, id := range done {
		ok[id] = struct{}{}
	}
	var lost []int64
	for _, l := range want {
		if _, hit := ok[l.ID]; !hit {
			lost = append(lost, l.ID)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return &LeaseLostError{IDs: lost}
}

// IsRetryable reports whether err is a transient database error (deadlock,
// lock timeout, serialization failure) after which the operation may be
// tried again.
func IsRetryable(err error) bool { return dialect.IsRetryable(err) }
