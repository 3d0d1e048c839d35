package queue

import (
	"context"
	"time"
)

// Outcome is how a job's run ended, as a Worker reports it to [Hooks].
type Outcome int

// The outcomes of a run.
const (
	// OutcomeCompleted: the handler returned nil and the job was deleted.
	OutcomeCompleted Outcome = iota
	// OutcomeRetried: the handler failed and the job will run again after
	// its backoff.
	OutcomeRetried
	// OutcomeDead: the handler failed for good (Permanent, or its attempts
	// are spent) and the job is kept dead for inspection.
	OutcomeDead
	// OutcomeSnoozed: the handler returned Snooze; the job runs again later
	// without spending an attempt.
	OutcomeSnoozed
	// OutcomeReleased: the worker shut down before the handler finished and
	// gave the job back as it was.
	OutcomeReleased
	// OutcomeLeaseLost: the claim was no longer the worker's when the run
	// ended (its lease expired and someone else took the job), so the
	// result changed nothing.
	OutcomeLeaseLost
	// OutcomeUnrecorded: the result could not be written (the database
	// stayed unreachable); the job runs again once its claim ends.
	OutcomeUnrecorded
)

var outcomeNames = [...]string{"completed", "retried", "dead", "snoozed", "released", "lease_lost", "unrecorded"}

// String returns the outcome's name as metrics label it: "completed",
// "retried", "dead", "snoozed", "released", "lease_lost" or "unrecorded".
func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return "unknown"
	}
	return outcomeNames[o]
}

// Outcomes lists every Outcome, for code that pre-creates a series per
// outcome.
func Outcomes() []Outcome {
	out := make([]Outcome, len(outcomeNames))
	for i := range out {
		out[i] = Outcome(i)
	}
	return out
}

// Hooks observes a Worker: metrics (package metrics implements it for
// Prometheus), tracing, logging. A Worker calls them from several
// goroutines at once, inline, so they must be safe for concurrent use and
// quick. Embed [NopHooks] to implement only some methods and to keep
// compiling when methods are added.
type Hooks interface {
	// ClaimDone follows every claim: the queue, the jobs asked for and
	// got, how long the claim took, and its error (nil when it succeeded,
	// with got possibly 0: an empty claim). A claim the Worker's shutdown
	// cut short is not reported: it is neither a claim nor a failure.
	ClaimDone(queue string, asked, got int, took time.Duration, err error)
	// JobStart runs before the handler, on the handler's goroutine. The
	// context it returns is the handler's, so a tracer can start a span
	// there; return ctx itself when there is nothing to add.
	JobStart(ctx context.Context, job *Job) context.Context
	// JobEnd follows the run once its outcome is known, which for
	// completed, retried, dead and snoozed runs is after the result was
	// written. ctx is the one JobStart returned, took is the handler's run
	// time and err its error (nil for a completed run).
	JobEnd(ctx context.Context, job *Job, outcome Outcome, took time.Duration, err error)
	// LeasesLost reports jobs whose claims the worker found lost, by a
	// heartbeat or when writing a result, as soon as it does. Their runs
	// end later with OutcomeLeaseLost.
	LeasesLost(queue string, ids []int64)
}

// NopHooks does nothing. Embed it in a Hooks implementation that needs
// only some of the methods.
type NopHooks struct{}

var _ Hooks = NopHooks{}

// ClaimDone does nothing.
func (NopHooks) ClaimDone(string, int, int, time.Duration, error) {}

// JobStart returns ctx.
func (NopHooks) JobStart(ctx context.Context, _ *Job) context.Context { return ctx }

// JobEnd does nothing.
func (NopHooks) JobEnd(context.Context, *Job, Outcome, time.Duration, error) {}

// LeasesLost does nothing.
func (NopHooks) LeasesLost(string, []int64) {}
