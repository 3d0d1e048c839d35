package mysql

import (
	"context"
	"database/sql"
	"errors"

	"github.com/dbqueue/dbq/queue"
)

// Completing with the next claim (queue.CompleteClaimer): the completions a
// Worker has waiting go in its claim's transaction. See docs/mysql.md.

// CompleteClaim completes p.Complete and claims up to p.N jobs of p.Queue
// (queue.CompleteClaimer) with one transaction and one commit instead of
// two: the completions' DELETE (complete.sql) runs first in the claim's
// READ COMMITTED transaction on the claimer's session, before its locking
// select, so a Worker's batch costs one round trip more than a claim
// rather than Complete's four, and one commit fewer.
//
// Each part's outcome is what Complete and Claim report. The completion
// takes effect only with the claim's COMMIT, so whenever that attempt does
// not commit, CompleteClaim writes the completion alone, as Complete, before
// it claims on or returns: when the claim part fails (a deadlock, a lock
// wait timeout, a lost session, a cancelled ctx), finds no candidates, or
// is not even tried (a bad argument, a closed claimer), the completion
// still ends committed or reports Complete's error. So does a batch whose
// DELETE matched fewer rows than it has distinct leases — some lease is
// not this holder's: the transaction is rolled back and Complete tells the
// lost leases from the others (a *queue.LeaseLostError) before the claim
// is tried again at once. As with Complete, a COMMIT whose outcome is
// unknown (the session died during it) is followed by Complete alone,
// which reports the leases lost if the first had committed after all.
func (c *Claimer) CompleteClaim(ctx context.Context, p queue.CompleteClaimParams) queue.CompleteClaimResult {
	var res queue.CompleteClaimResult
	comp := &completion{leases: dedupeLeases(p.Complete)}
	if len(comp.leases) == 0 || len(comp.leases) > maxList {
		// Nothing to carry, or more than one statement's worth.
		res.CompleteErr = c.Complete(ctx, p.Complete)
		res.Jobs, res.ClaimErr = c.Claim(ctx, p.Queue, p.N)
		return res
	}
	res.Jobs, res.ClaimErr = c.claim(ctx, p.Queue, p.N, comp)
	if comp.pending() {
		comp.alone(ctx, c) // the claim returned before trying it
	}
	res.CompleteErr = comp.err
	return res
}

// completion is the batch of completions a CompleteClaim carries into
// its claim: written (done) by the first claim transaction that
// commits, or else alone.
type completion struct {
	leases []queue.Lease // distinct, at most maxList
	done   bool
	err    error // Complete's outcome, once done
}

// pending reports whether comp is still to be written. A nil comp is not.
func (comp *completion) pending() bool { return comp != nil && !comp.done }

// committed records that a claim transaction carrying comp committed: every
// lease was this holder's and its job is gone.
func (comp *completion) committed(c *Claimer) {
	comp.done = true
	c.heldMu.Lock()
	for _, l := range comp.leases {
		if t, ok := c.held[l.ID]; ok && t == l.Token {
			delete(c.held, l.ID)
		}
	}
	c.heldMu.Unlock()
}

// alone writes comp with Complete.
func (comp *completion) alone(ctx context.Context, c *Claimer) {
	comp.done = true
	comp.err = c.Complete(ctx, comp.leases)
}

// errCompletionShort rolls back a claim transaction whose completions'
// DELETE matched fewer rows than it had leases.
var errCompletionShort = errors.New("dbq: mysql: some completed lease was not this holder's")

// completeIn runs complete.sql for leases (distinct) in tx, and returns
// errCompletionShort unless it deleted one row per lease.
func (c *Claimer) completeIn(ctx context.Context, tx *sql.Tx, leases []queue.Lease) error {
	res, err := tx.ExecContext(ctx, c.d.stmts.get(sqlComplete, len(leases)), leaseArgs(nil, leases)...)
	if err != nil {
		return c.d.classify("complete", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return c.d.classify("complete", err)
	}
	if n != int64(len(leases)) {
		return errCompletionShort
	}
	return nil
}
