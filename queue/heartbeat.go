package queue

// Beside the stages: the heartbeat, which renews the claims of the jobs in
// flight (or checks the connection that holds their locks) and cancels the
// handlers of claims found lost. See docs/lifecycle.md.

import (
	"context"
	"errors"
	"time"
)

// leasesOf returns the leases of ls whose ids are in ids.
func leasesOf(ls []Lease, ids []int64) []Lease {
	want := make(map[int64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	var out []Lease
	for _, l := range ls {
		if want[l.ID] {
			out = append(out, l)
		}
	}
	return out
}

// heartbeat extends the leases of running jobs every interval until ctx is
// done, and cancels (with lostFn, which returns those it cancelled) jobs
// whose lease was lost while their handler still ran. Each Extend may take at most
// one interval: one stuck on a dead connection or a lock wait would
// otherwise hold up every renewal behind it while the leases run out.
// After a failed Extend the next try comes an eighth of an interval later
// (backing off to a whole one while it keeps failing), so a lease of three
// intervals gets at least two more tries after a miss.
func (w *Worker) heartbeat(ctx context.Context, c Claimer, every time.Duration, held func() []Lease, lostFn func([]Lease) []int64) {
	if every <= 0 {
		every = time.Millisecond
	}
	t := time.NewTimer(every)
	defer t.Stop()
	fails := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next := every
		if ls := held(); len(ls) > 0 {
			ectx, cancel := context.WithTimeout(ctx, every)
			err := c.Extend(ectx, ls)
			cancel()
			var lost *LeaseLostError
			if err == nil || errors.As(err, &lost) {
				fails = 0
			}
			switch {
			case errors.As(err, &lost):
				if ids := lostFn(leasesOf(ls, lost.IDs)); len(ids) > 0 {
					w.log.Warn("dbq: leases lost; cancelling their handlers", "ids", ids)
					if w.hooks != nil {
						w.hooks.LeasesLost(w.cfg.Queue, ids)
					}
				}
			case err != nil && ctx.Err() == nil:
				w.log.Warn("dbq: heartbeat failed", "err", err)
				// every/8, /4, /2, then every interval while it keeps failing.
				next = Jitter(min(every, every/8<<min(fails, 3)), 0.5)
				fails++
			}
		}
		t.Reset(next)
	}
}
