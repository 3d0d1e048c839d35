package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dbqueue/dbq/queue"
)

// Lease writes: Complete, Retry, Release and Extend, one statement per
// chunk of leases, matched on state and token.

// Complete deletes the jobs whose leases are still this holder's.
func (c *Claimer) Complete(ctx context.Context, leases []queue.Lease) error {
	return c.writeLeases(ctx, "complete", leases, func(ls []queue.Lease) (string, []any) {
		return c.d.stmts.get(sqlComplete, len(ls)), leaseArgs(nil, ls)
	})
}

// Release puts the jobs back, ready, spending no attempt.
func (c *Claimer) Release(ctx context.Context, leases []queue.Lease) error {
	return c.release(ctx, "release", leases)
}

func (c *Claimer) release(ctx context.Context, what string, leases []queue.Lease) error {
	return c.writeLeases(ctx, what, leases, func(ls []queue.Lease) (string, []any) {
		return c.d.stmts.get(sqlRelease, len(ls)), leaseArgs(nil, ls)
	})
}

// Extend renews the leases: they now end Lease after the database's now.
func (c *Claimer) Extend(ctx context.Context, leases []queue.Lease) error {
	return c.writeLeases(ctx, "extend", leases, func(ls []queue.Lease) (string, []any) {
		return c.d.stmts.get(sqlExtend, len(ls)), leaseArgs([]any{micros(c.d.cfg.Lease)}, ls)
	})
}

// Retry records failed runs: attempt+1, run_at = now + Delay, the error
// kept; a job out of attempts, or marked Dead, becomes dead. A Snooze
// makes the job ready again at now + Delay with its attempt and last_error
// as they were (Error and Dead are ignored). Either way the lease's token
// must still be the job's.
func (c *Claimer) Retry(ctx context.Context, retries []queue.RetryParams) error {
	byLease := make(map[queue.Lease]queue.RetryParams, len(retries))
	leases := make([]queue.Lease, len(retries))
	for i, r := range retries {
		if r.Delay < 0 {
			return fmt.Errorf("%w: negative retry Delay %v", queue.ErrInvalidJob, r.Delay)
		}
		leases[i] = r.Lease
		byLease[r.Lease] = r
	}
	return c.writeLeases(ctx, "retry", leases, func(ls []queue.Lease) (string, []any) {
		args := make([]any, 0, 11*len(ls))
		for _, l := range ls {
			mode := "retry"
			switch r := byLease[l]; {
			case r.Snooze:
				mode = "snooze"
			case r.Dead:
				mode = "dead"
			}
			args = append(args, l.ID, mode)
		}
		for _, l := range ls {
			args = append(args, l.ID, micros(byLease[l].Delay))
		}
		for _, l := range ls {
			var msg any // NULL keeps last_error
			if r := byLease[l]; !r.Snooze {
				msg = truncateError(r.Error)
			}
			args = append(args, l.ID, msg)
		}
		for _, l := range ls {
			inc := 1
			if byLease[l].Snooze {
				inc = 0
			}
			args = append(args, l.ID, inc)
		}
		return c.d.stmts.get(sqlRetry, len(ls)), leaseArgs(args, ls)
	})
}

// leaseArgs appends the parameters every settling statement ends with: the
// ids for the IN list, then (id, token) pairs for the token match.
func leaseArgs(args []any, ls []queue.Lease) []any {
	for _, l := range ls {
		args = append(args, l.ID)
	}
	for _, l := range ls {
		args = append(args, l.ID, l.Token)
	}
	return args
}

// writeLeases ends or renews leases with the statement build makes for a set of
// them. Per chunk, in a READ COMMITTED transaction on the pool, the fast
// path runs the statement alone: it matches rows by primary key, state
// and token, and when it changed one row per lease every lease was held
// and the transaction commits. Otherwise it is rolled back and the slow
// path tells held leases from lost ones: lock the rows by primary key,
// read their tokens, run the statement for the held ones, commit. Lost
// leases change nothing and are reported in a *queue.LeaseLostError.
func (c *Claimer) writeLeases(ctx context.Context, what string, leases []queue.Lease,
	build func([]queue.Lease) (string, []any)) error {
	if (c.closed.Load() && what != "close") || c.d.closed.Load() {
		return queue.ErrClosed
	}
	want := dedupeLeases(leases)
	var done []int64
	for start := 0; start < len(want); start += maxList {
		chunk := want[start:min(start+maxList, len(want))]
		var ok []int64
		err := c.d.retry(ctx, func() error {
			var err error
			ok, err = c.writeLeaseChunk(ctx, what, chunk, build)
			return err
		})
		if err != nil {
			return err
		}
		done = append(done, ok...)
	}
	// Forget what ended and what was lost; an extended lease stays held.
	keep := map[int64]bool{}
	if what == "extend" {
		for _, id := range done {
			keep[id] = true
		}
	}
	c.heldMu.Lock()
	for _, l := range want {
		if t, ok := c.held[l.ID]; ok && t == l.Token && !keep[l.ID] {
			delete(c.held, l.ID)
		}
	}
	c.heldMu.Unlock()
	return queue.LostLeases(want, done)
}

func (c *Claimer) writeLeaseChunk(ctx context.Context, what string, chunk []queue.Lease,
	build func([]queue.Lease) (string, []any)) ([]int64, error) {
	d := c.d
	ids := make([]int64, len(chunk))
	for i, l := range chunk {
		ids[i] = l.ID
	}
	// Fast path.
	tx, err := beginRC(ctx, d.db)
	if err != nil {
		return nil, d.classify(what, err)
	}
	defer tx.Rollback()
	query, args := build(chunk)
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return nil, d.classify(what, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == int64(len(chunk)) {
		if err := tx.Commit(); err != nil {
			return nil, d.classify(what+" commit", err)
		}
		return ids, nil
	}
	if err := tx.Rollback(); err != nil {
		return nil, d.classify(what, err)
	}

	// Slow path: some lease is lost.
	tx, err = beginRC(ctx, d.db)
	if err != nil {
		return nil, d.classify(what, err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, d.stmts.get(sqlLeaseLock, len(ids)), anys(ids)...)
	if err != nil {
		return nil, d.classify(what, err)
	}
	tokens := make(map[int64]int64, len(chunk))
	for rows.Next() {
		var id int64
		var token sql.NullInt64
		if err := rows.Scan(&id, &token); err != nil {
			rows.Close()
			return nil, d.classify(what, err)
		}
		if token.Valid {
			tokens[id] = token.Int64
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, d.classify(what, err)
	}
	var held []queue.Lease
	for _, l := range chunk {
		if t, ok := tokens[l.ID]; ok && t == l.Token {
			held = append(held, l)
		}
	}
	if len(held) == 0 {
		return nil, nil // nothing to change; the rollback ends the tx
	}
	query, args = build(held)
	if _, err := tx.ExecContext(ctx, query, args...); err != nil {
		return nil, d.classify(what, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, d.classify(what+" commit", err)
	}
	out := make([]int64, len(held))
	for i, l := range held {
		out[i] = l.ID
	}
	return out, nil
}

// dedupeLeases drops repeated leases (same id and token), keeping order.
func dedupeLeases(ls []queue.Lease) []queue.Lease {
	seen := make(map[queue.Lease]struct{}, len(ls))
	out := ls[:0:0]
	for _, l := range ls {
		if _, dup := seen[l]; !dup {
			seen[l] = struct{}{}
			out = append(out, l)
		}
	}
	return out
}
