package queue

import "time"

// State is where a job is in its life.
type State string

// The states a stored job can be in. A completed job is deleted, so it has
// no state. A ready job whose run_at is in the future is "scheduled" in
// [Stats] but has state ready.
const (
	StateReady   State = "ready"
	StateClaimed State = "claimed"
	StateDead    State = "dead"
)

// Job is a stored job, as a claim returns it.
type Job struct {
	ID    int64
	Queue string
	// Kind names what the job is (see [Args]); empty for a job enqueued
	// without one.
	Kind     string
	Payload  []byte
	Priority int16 // lower runs first
	RunAt    time.Time
	// Attempt counts the failed runs so far: 0 on the first run.
	Attempt     int
	MaxAttempts int
	State       State
	// Token identifies this claim. Complete, Retry, Release and Extend
	// present it; a holder whose claim was lost gets ErrLeaseLost.
	Token int64
	// ClaimedUntil is when the lease ends, on the database clock; zero for
	// lock-based claims that last as long as the claimer's connection.
	ClaimedUntil time.Time
	LastError    string
	DedupeKey    string // empty when the job has none
	CreatedAt    time.Time
}

// Lease returns the handle that ends or renews this claim.
func (j *Job) Lease() Lease { return Lease{ID: j.ID, Token: j.Token} }

// Leases returns the leases of jobs, in order: what Complete, Release and
// Extend take for a batch a Claim returned.
func Leases(jobs []*Job) []Lease {
	out := make([]Lease, len(jobs))
	for i, j := range jobs {
		out[i] = j.Lease()
	}
	return out
}

// IDs returns the ids of jobs, in order.
func IDs(jobs []*Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// Lease names one claim of one job: the job and the token its claim got.
type Lease struct {
	ID    int64
	Token int64
}

// NewJob describes a job to enqueue.
type NewJob struct {
	// Queue is required; see [dialect.ValidateQueue] for the allowed names.
	Queue string
	// Kind names what the job is: [Kinds] sets it from [Args.Kind]. Empty
	// means none; otherwise see [ValidateKind].
	Kind string
	// Payload is stored as opaque bytes, at most Config.MaxPayloadBytes.
	Payload []byte
	// Priority orders jobs within a queue, lower first. Default 0.
	Priority int16
	// RunAt is the earliest time to run the job. Zero means the database's
	// now() plus Delay.
	RunAt time.Time
	// Delay postpones a job whose RunAt is zero, measured on the database
	// clock.
	Delay time.Duration
	// MaxAttempts is how many runs a job gets before it is dead. Zero means
	// Config.MaxAttempts.
	MaxAttempts int
	// DedupeKey, when set, is unique among the queue's stored jobs: an
	// enqueue that collides fails with ErrDuplicate and inserts nothing.
	// The key is free again once the job completes.
	DedupeKey string
}

// RetryParams ends a claim with a failure.
type RetryParams struct {
	Lease Lease
	// Delay is the backoff: the job runs again no sooner than now + Delay on
	// the database clock.
	Delay time.Duration
	// Error is kept in the job's last_error (truncated to MaxErrorBytes).
	Error string
	// Dead makes the job dead at once, whatever attempts it has left.
	Dead bool
	// Snooze reschedules the job at now + Delay without spending an
	// attempt: attempt and last_error stay as they were, and Error and Dead
	// are ignored. See [Snooze].
	Snooze bool
}

// MaxErrorBytes is the longest last_error kept; longer messages are cut.
const MaxErrorBytes = 4000

// QueueStats counts one queue's stored jobs.
type QueueStats struct {
	Queue     string `json:"queue"`
	Ready     int64  `json:"ready"`     // run_at has passed
	Scheduled int64  `json:"scheduled"` // run_at in the future
	Held      int64  `json:"held"`      // claimed (lease dialects) or locked (advisory)
	Dead      int64  `json:"dead"`
	Paused    bool   `json:"paused"` // claims take none of its jobs; see Queue.Pause
	// OldestReadyAge is how long the oldest ready job has waited past its
	// run_at, in seconds.
	OldestReadyAge float64 `json:"oldest_ready_age_seconds"`
}
