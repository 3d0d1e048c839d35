package queue

import "context"

// JobKey names a job by its queue and dedupe key, unique per table.
type JobKey struct {
	Queue, DedupeKey string
}

// ExportFilter selects the jobs a [Mover] exports. Held jobs are never
// exported: they belong to their holder until it completes, fails or
// releases them.
type ExportFilter struct {
	// Queues keeps only these queues' jobs; empty means every queue.
	Queues []string
	// Ready, Scheduled and Dead select ready jobs whose run_at has passed,
	// ready jobs whose run_at is in the future, and dead jobs.
	Ready, Scheduled, Dead bool
	// AfterID keeps jobs with a larger id.
	AfterID int64
	// Limit caps the jobs of one batch.
	Limit int
}

// ExportBatch is an open batch of exported jobs: they stay stored and
// locked until Commit or Rollback.
type ExportBatch interface {
	// Jobs returns the batch's jobs in id order.
	Jobs() []*Job
	// Cursor is the AfterID of the next batch: the largest id the export
	// looked at, locked or not. Zero means it found no job to look at, so
	// the table holds no more jobs after f.AfterID that f selects.
	Cursor() int64
	// Commit deletes the jobs of ids, which must be jobs of the batch, and
	// ends the batch; the batch's other jobs stay as they were.
	Commit(ctx context.Context, ids []int64) error
	// Rollback ends the batch and changes nothing. It is safe to call after
	// Commit, when it does nothing.
	Rollback() error
}

// Imported is one job as [Mover.Import] found it stored.
type Imported struct {
	Job *Job
	New bool // stored by this Import, not found there
}

// Survey is what [Mover.Survey] found: the largest payload in bytes, and
// the longest dedupe key in bytes and in characters (UTF-8), among the
// selected jobs.
type Survey struct {
	MaxPayload, MaxKeyBytes, MaxKeyChars int64
}

// MoveLimits are the largest payload (bytes) and dedupe key (bytes and
// characters) a table stores; zero means no limit of that kind. TextKeys
// means a dedupe key must be valid UTF-8 without NUL bytes.
type MoveLimits struct {
	Payload, KeyBytes, KeyChars int64
	TextKeys                    bool
}
