package sqlite

import (
	"context"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// rescueBatch bounds the expired leases one rescue gives back, so a claim
// after a mass death stays short; the rest follow on the next claims.
const rescueBatch = 1000

// rescueDue reports whether a rate-limited rescue is due: at most every
// quarter lease, unless the last one hit its bound.
func (d *Driver) rescueDue() bool {
	return int64(time.Since(d.start)) >= d.nextRescue.Load()
}

// rescue gives back up to rescueBatch expired leases and schedules the
// next rate-limited rescue.
func (d *Driver) rescue(ctx context.Context, r runner) (int, error) {
	res, err := r.exec(ctx, d.stmts.rescue, rescueBatch)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, interpret(err)
	}
	next := time.Since(d.start)
	if n < rescueBatch {
		next += d.cfg.Lease / 4
	}
	d.nextRescue.Store(int64(next))
	if n > 0 {
		d.log.Debug("dbq: sqlite: rescued expired leases", "jobs", n)
	}
	return int(n), nil
}

// Rescue gives back every job whose lease has expired, in transactions of
// at most 1,000 jobs, and returns how many. Claims do this on their own; a
// Rescue call only makes the jobs claimable (and counted as ready) sooner.
func (d *Driver) Rescue(ctx context.Context) (int, error) {
	if d.closed.Load() {
		return 0, queue.ErrClosed
	}
	total := 0
	for {
		var n int
		err := d.write(ctx, false, func(ctx context.Context, r runner) error {
			var err error
			n, err = d.rescue(ctx, r)
			return err
		})
		total += n
		if err != nil || n < rescueBatch {
			return total, err
		}
	}
}
