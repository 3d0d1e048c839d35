package queue

import "context"

// Mover is implemented by drivers whose jobs package move can take out of
// one database and put into another. Every dialect's jobs table has the
// same columns, so a job moves whole: queue, kind, payload bytes, priority,
// run_at, attempt, max_attempts, last_error, dedupe_key, created_at and
// state (ready or dead).
type Mover interface {
	// Identity names the database and table the driver stores jobs in,
	// without credentials, e.g. "postgres://10.0.0.5:5432/app/public.dbq_jobs".
	// Two drivers over the same table give the same identity.
	Identity(ctx context.Context) (string, error)
	// Survey measures the largest payload and dedupe key among the stored
	// jobs that f selects, ignoring AfterID and Limit.
	Survey(ctx context.Context, f ExportFilter) (Survey, error)
	// Export starts a batch: up to f.Limit stored jobs that f selects and
	// that no one holds, in id order after f.AfterID, each locked so that
	// claims (and other exports) skip it until the batch ends. It returns
	// a batch with no jobs when there are none.
	Export(ctx context.Context, f ExportFilter) (ExportBatch, error)
	// Import stores jobs as they are, in one transaction: each keeps its
	// kind, state, attempt, max_attempts, last_error, run_at, priority, payload,
	// dedupe key and created_at, and gets a new id. Every job must have a
	// DedupeKey. A job whose queue already stores a job with its key is not
	// stored again. It returns, in order, each job as stored (the new one or
	// the one already there) and whether it is new.
	Import(ctx context.Context, jobs []*Job) ([]Imported, error)
	// Limits gives the largest payload and dedupe key, in bytes, the table
	// can store.
	Limits(ctx context.Context) (MoveLimits, error)
	// Stored reads, outside any batch, the stored jobs (held ones too, in
	// state claimed where the dialect marks them) that have the queue and
	// dedupe key of one of keys, in no particular order; a key no job has
	// is left out. Package move reads every job it moved back with it to
	// verify the destination.
	Stored(ctx context.Context, keys []JobKey) ([]*Job, error)
}

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
