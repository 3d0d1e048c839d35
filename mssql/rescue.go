package mssql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/dbqueue/dbq/queue"
)

// Rescue moves every job whose lease has expired back to its queue, in
// passes of at most RescueBatch jobs, and returns how many it moved. The
// run that lost its lease counts as a failed attempt; a job out of
// attempts becomes dead. One pass at a time runs over a table, across all
// processes: a pass that finds another one running (it holds the table's
// application lock) moves nothing, and Rescue returns, leaving the rest to
// the pass that runs. Claim runs one pass at most every quarter lease, so
// a deployment with claimers needs no other reaper; call Rescue to return
// expired leases on a queue no one is claiming from.
func (d *Driver) Rescue(ctx context.Context) (int, error) {
	if d.closed.Load() {
		return 0, queue.ErrClosed
	}
	total := 0
	for {
		n, ran, err := d.rescueOnce(ctx)
		total += n
		if err != nil || !ran || n < RescueBatch {
			return total, err
		}
	}
}

// rescueError is last_error for a job whose lease expired.
const rescueError = "dbq: lease expired before the job ended (claimer died, stalled or lost its connection)"

// rescueOnce runs one rescue pass: it reports how many jobs it moved and
// whether it ran at all, which it does not while another pass holds the
// table's application lock.
func (d *Driver) rescueOnce(ctx context.Context) (moved int, ran bool, err error) {
	var granted, n int32
	stmt, err := d.variant(ctx, d.db, d.sql, sqlRescue, sqlRescue, 0)
	if err != nil {
		return 0, false, classify("rescue", d.dedupe, err)
	}
	err = d.db.QueryRowContext(ctx, stmt, sql.Named("lock_resource", d.rescueLock),
		sql.Named("batch", int32(RescueBatch)), sql.Named("error", rescueError)).Scan(&granted, &n)
	if err != nil {
		return 0, false, classify("rescue", d.dedupe, err)
	}
	return int(n), granted >= 0, nil
}

// maxLockResource is the longest application lock name sp_getapplock
// takes: its @Resource is nvarchar(255), and a longer one is cut.
const maxLockResource = 255

// lockResource names an application lock of the dialect: "dbq." + what +
// ":" + the quoted, qualified table it guards, so that each table has its
// own. Application locks belong to the current database, so the database
// needs no place in the name. A name that would be cut — none that valid
// Names make — becomes a hash of itself instead, which stays distinct.
func lockResource(what, table string) string {
	r := "dbq." + what + ":" + table
	if utf8.RuneCountInString(r) <= maxLockResource {
		return r
	}
	sum := sha256.Sum256([]byte(r))
	return "dbq." + what + ":sha256:" + hex.EncodeToString(sum[:])
}

// maybeRescue runs one rescue pass when none has run for a quarter
// lease.
func (d *Driver) maybeRescue(ctx context.Context) {
	now := time.Now().UnixNano()
	last := d.lastRescue.Load()
	if now-last < int64(d.cfg.Lease/4) || !d.lastRescue.CompareAndSwap(last, now) {
		return
	}
	if n, _, err := d.rescueOnce(ctx); err != nil {
		if ctx.Err() == nil && !errors.Is(err, queue.ErrNotMigrated) {
			d.cfg.Logger.Warn("dbq: rescue of expired leases failed", "err", err)
		}
	} else if n > 0 {
		d.cfg.Logger.Info("dbq: rescued jobs whose lease expired", "jobs", n)
	}
}
