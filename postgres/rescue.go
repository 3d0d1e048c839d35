package postgres

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// rescueLimit is the most expired leases one rescue statement returns to
// ready (rescue.sql).
const rescueLimit = 1000

// Rescue returns every expired lease to ready (in statements of at most
// 1000 rows) and says how many it returned. SKIP LOCKED claimers run one
// such statement on their own at most every quarter lease, so calling it is
// only needed to make jobs claimable (and counted as ready) sooner. It is a
// no-op for the Advisory strategy, whose claims end with their connection.
func (d *Driver) Rescue(ctx context.Context) (int, error) {
	if d.closed.Load() {
		return 0, queue.ErrClosed
	}
	total := 0
	for {
		n, err := d.rescueOnce(ctx)
		total += n
		if err != nil || n < rescueLimit {
			return total, err
		}
	}
}

func (d *Driver) rescueOnce(ctx context.Context) (int, error) {
	ids, err := queryIDs(ctx, d.pool, d.stmts.rescue, d.stmts.rescueKey)
	if err != nil {
		return 0, interpret("rescue", err)
	}
	d.lastRescue.Store(time.Now().UnixNano())
	return len(ids), nil
}

// maybeRescue runs one rescue statement when none has run for a quarter
// lease, so expired leases come back without a separate process.
func (d *Driver) maybeRescue(ctx context.Context) error {
	last := d.lastRescue.Load()
	now := time.Now().UnixNano()
	if now-last < int64(d.cfg.Lease/4) || !d.lastRescue.CompareAndSwap(last, now) {
		return nil
	}
	n, err := d.rescueOnce(ctx)
	if n > 0 {
		d.log.Debug("dbq: returned expired leases to ready", "jobs", n)
	}
	return err
}

// tableKey derives a one-argument advisory lock key for purpose on table
// (its quoted, qualified name), the same in every process.
func tableKey(purpose, table string) int64 {
	h := fnv.New64a()
	h.Write([]byte("dbq/" + purpose + "/" + table))
	return int64(h.Sum64())
}

// Rescue returns every expired lease of the table to ready; see
// [Driver.Rescue].
func (c *SkipLockedClaimer) Rescue(ctx context.Context) (int, error) { return c.d.Rescue(ctx) }
