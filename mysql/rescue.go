package mysql

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	mysqldrv "github.com/go-sql-driver/mysql"
)

// ErrRescueBusy: a rescue was skipped because another session — most
// likely another process's — holds the table's rescue lock and is
// rescuing it now. Nothing was changed; the jobs whose leases expired are
// that session's to give back.
var ErrRescueBusy = errors.New("dbq: mysql: rescue skipped: another session is rescuing this table")

// Rescue gives back every job whose lease has expired — its holder died or
// stalled without Extend — in every queue, and returns how many. Each
// counts as a failed run: attempt+1, last_error says so, and a job out of
// attempts is dead. Claim runs one bounded pass over its own queue at most
// every Lease/4 by itself; call Rescue from a cron or the CLI to do it for
// all queues now. One session at a time rescues a table: while another
// holds its rescue lock, Rescue changes nothing and returns ErrRescueBusy.
func (d *Driver) Rescue(ctx context.Context) (int, error) {
	if d.closed.Load() {
		return 0, queue.ErrClosed
	}
	cn, err := d.db.Conn(ctx)
	if err != nil {
		return 0, d.classify("rescue", err)
	}
	defer cn.Close()
	total := 0
	err = d.withRescueLock(ctx, cn, func() error {
		queues, err := d.rescueQueues(ctx, cn)
		if err != nil {
			return err
		}
		for _, q := range queues {
			for {
				n, err := d.rescueOnce(ctx, cn, q)
				total += n
				if err != nil {
					return err
				}
				if n < d.cfg.RescueBatch {
					break
				}
			}
		}
		return nil
	})
	return total, err
}

// rescueQueues lists the queues that have jobs.
func (d *Driver) rescueQueues(ctx context.Context, cn *sql.Conn) ([]string, error) {
	rows, err := cn.QueryContext(ctx, d.stmts.get(sqlRescueQueues, 0))
	if err != nil {
		return nil, d.classify("rescue", err)
	}
	defer rows.Close()
	var queues []string
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			return nil, d.classify("rescue", err)
		}
		queues = append(queues, q)
	}
	return queues, d.classify("rescue", rows.Err())
}

// withRescueLock runs fn while session cn holds the table's rescue lock,
// a GET_LOCK whose name is the table's (rescueLockName): user locks are
// server-wide and die with their session, so a rescuer that dies frees
// the lock at once. GET_LOCK is asked with timeout 0: when another session
// holds the lock, fn does not run and the result is ErrRescueBusy. The
// lock is released on cn afterwards, even when ctx is done; if that fails,
// cn, which may still hold it, is closed rather than returned to the pool
// (the error then says so and matches driver.ErrBadConn). A server that
// refuses user locks altogether (Galera) gets fn run without one.
func (d *Driver) withRescueLock(ctx context.Context, cn *sql.Conn, fn func() error) error {
	var got sql.NullInt64
	if err := cn.QueryRowContext(ctx, d.stmts.get(sqlRescueGetLock, 0), d.rescueLock).Scan(&got); err != nil {
		var me *mysqldrv.MySQLError
		if errors.As(err, &me) && me.Number == erNotSupportedYet {
			// A Galera cluster refuses user locks. The rescue is safe
			// without one (it locks rows with SKIP LOCKED); concurrent
			// passes only repeat each other's candidate reads.
			d.noLockOnce.Do(func() {
				d.log.Warn("dbq: mysql: the server refuses GET_LOCK; rescues run without the rescue lock", "err", err)
			})
			return fn()
		}
		return d.classify("rescue lock", err)
	}
	switch {
	case !got.Valid:
		return fmt.Errorf("dbq: mysql rescue lock: GET_LOCK(%q) failed", d.rescueLock)
	case got.Int64 != 1:
		return ErrRescueBusy
	}
	if d.inRescue != nil {
		d.inRescue()
	}
	err := fn()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stepTimeout)
	defer cancel()
	var released sql.NullInt64
	if rerr := cn.QueryRowContext(rctx, d.stmts.get(sqlRescueReleaseLock, 0), d.rescueLock).Scan(&released); rerr != nil {
		discard(cn) // ends the session, and its lock
		return errors.Join(err, fmt.Errorf("dbq: mysql: releasing the rescue lock failed, session closed: %w",
			errors.Join(rerr, driver.ErrBadConn)))
	}
	return err
}

// rescueLockName returns the name of table's rescue lock in database:
// user lock names are server-wide, so it names both, and at most 64
// characters long (MySQL's limit), with a digest in place of longer names.
func rescueLockName(database, table string) string {
	const prefix = "dbq_rescue:"
	name := prefix + database + "." + table
	if len(name) <= 64 {
		return name
	}
	sum := sha256.Sum256([]byte(database + "." + table))
	return prefix + hex.EncodeToString(sum[:])[:64-len(prefix)]
}

// rescueOnce runs one bounded pass over queue q: candidate select through
// the claim index, then lock by primary key with SKIP LOCKED and update
// those still held and expired, in a READ COMMITTED transaction. It
// returns how many rows the update changed.
func (d *Driver) rescueOnce(ctx context.Context, c conn, q string) (int, error) {
	var n int
	err := d.retry(ctx, func() error {
		n = 0
		cand, err := dialect.QueryIDs(ctx, c, d.stmts.get(sqlRescueCandidates, 0), q, d.cfg.RescueBatch)
		if err != nil || len(cand) == 0 {
			return d.classify("rescue", err)
		}
		tx, err := beginRC(ctx, c)
		if err != nil {
			return d.classify("rescue", err)
		}
		defer tx.Rollback()
		locked, err := dialect.QueryIDs(ctx, tx, d.stmts.get(sqlRescueLock, len(cand)), anys(cand)...)
		if err != nil {
			return d.classify("rescue", err)
		}
		// The UPDATE decides: it changes only rows still held and expired,
		// and the pass counts what it changed.
		var changed int64
		if len(locked) > 0 {
			res, err := tx.ExecContext(ctx, d.stmts.get(sqlRescue, len(locked)), anys(locked)...)
			if err != nil {
				return d.classify("rescue", err)
			}
			if changed, err = res.RowsAffected(); err != nil {
				return d.classify("rescue", err)
			}
		}
		if err := tx.Commit(); err != nil {
			return d.classify("rescue", err)
		}
		n = int(changed)
		return nil
	})
	if n > 0 {
		d.log.Info("dbq: mysql: gave back jobs whose lease expired", "jobs", n, "queue", q, "table", d.stmts.jobsTable)
	}
	return n, err
}

// rescueDue reports whether a claim of queue q should run a rescue pass
// now, and if so books the pass so that concurrent claims skip it.
func (d *Driver) rescueDue(q string) bool {
	v, _ := d.lastRescue.LoadOrStore(q, new(atomic.Int64))
	last := v.(*atomic.Int64)
	prev := last.Load()
	now := int64(time.Since(d.epoch)) + 1 // never 0, which means "not yet"
	if prev != 0 && now-prev < int64(d.cfg.Lease/4) {
		return false
	}
	return last.CompareAndSwap(prev, now)
}
