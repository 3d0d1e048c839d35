package dialect

import "errors"

// RetryableError marks a database error after which the same operation may
// simply be tried again: a deadlock, a lock timeout, a serialization
// failure. It keeps the driver's error for errors.As.
type RetryableError struct {
	Err error
}

func (e *RetryableError) Error() string { return "dbq: retryable: " + e.Err.Error() }

// Unwrap returns the driver's error.
func (e *RetryableError) Unwrap() error { return e.Err }

// IsRetryable reports whether err, or an error it wraps, is a
// [RetryableError].
func IsRetryable(err error) bool {
	var r *RetryableError
	return errors.As(err, &r)
}
