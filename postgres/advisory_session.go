package postgres

// The advisory claimer's session: the one connection whose session holds
// its locks, how it is set up and checked (a pooler that shares sessions is
// refused), and how stray locks are swept when a statement was cut off.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// connect takes a connection from the pool and starts a new lease session
// on it. c.mu is held.
func (c *AdvisoryClaimer) connect(ctx context.Context) error {
	conn, err := c.d.pool.Acquire(ctx)
	if err != nil {
		return interpret("acquire connection", err)
	}
	c.conn = conn
	c.prepared = false
	c.token = rand.Int64N(math.MaxInt64-1) + 1
	c.mark = strconv.FormatInt(c.token, 36)
	c.held = map[int64]lockKey{}
	c.nss = map[int32]bool{}
	if err := c.markSession(ctx); err != nil {
		c.dropConn()
		return err
	}
	if err := c.lookupNamespace(ctx); err != nil {
		c.dropConn()
		return err
	}
	return nil
}

// markSession makes the connection's session the claimer's own
// (session.sql), or refuses it with queue.ErrUnsupportedServer when
// another client shares it. c.mu is held.
func (c *AdvisoryClaimer) markSession(ctx context.Context) error {
	gctx, done := guard(ctx, c.conn.Conn().PgConn())
	defer done()
	var (
		marked    bool
		isolation string
	)
	if err := c.conn.QueryRow(gctx, c.d.stmts.session, c.mark, c.d.stmts.table).Scan(&c.pid, &marked, &isolation); err != nil {
		return failed(ctx, "take a session", err)
	}
	c.oneTx = isolation == "read committed"
	if !marked {
		return fmt.Errorf("%w: postgres: the session of server process %d already holds another advisory claimer's locks or mark; %s",
			queue.ErrUnsupportedServer, c.pid, adviceAdvisory)
	}
	return nil
}

// lookupNamespace learns the table's lock namespace (its oid), when it
// exists. c.mu is held.
func (c *AdvisoryClaimer) lookupNamespace(ctx context.Context) error {
	gctx, done := guard(ctx, c.conn.Conn().PgConn())
	defer done()
	var (
		pid int32
		ns  pgtype.Int4
	)
	if err := c.conn.QueryRow(gctx, c.d.stmts.namespace, c.d.stmts.table).Scan(&pid, &ns); err != nil {
		return failed(ctx, "look up the jobs table", err)
	}
	if ns.Valid {
		c.nss[ns.Int32] = true
	}
	return nil
}

// dropConn closes the connection, which ends its session and with it every
// lock it holds, and forgets its leases. c.mu is held.
func (c *AdvisoryClaimer) dropConn() {
	if c.conn == nil {
		return
	}
	pc := c.conn
	c.conn = nil
	c.held, c.nss = nil, nil
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	_ = pc.Conn().Close(ctx)
	cancel()
	pc.Release() // a closed connection is destroyed, not pooled
}

// broken reports whether c's connection is gone, dropping it if so.
// c.mu is held.
func (c *AdvisoryClaimer) broken() bool {
	if c.conn == nil {
		return true
	}
	if c.conn.Conn().IsClosed() {
		c.dropConn()
		return true
	}
	return false
}

// resync restores the invariant that the connection holds the locks of
// exactly the jobs in c.held, after a statement failed or was cut off
// partway (session locks survive a cancelled statement): it finds the
// session's locks in pg_locks and releases those that are not held jobs'.
// It runs on a context of its own. If that fails, the connection is
// dropped, which releases everything. c.mu is held.
func (c *AdvisoryClaimer) resync() {
	if c.broken() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var err error
	for range 3 {
		if err = c.sweep(ctx); err == nil {
			return
		}
		if c.broken() {
			return
		}
	}
	c.d.log.Warn("dbq: postgres: could not release stray advisory locks; dropping the connection", "err", err)
	c.dropConn()
}

// sweep releases this session's advisory locks in our namespaces that no
// held job accounts for. c.mu is held.
func (c *AdvisoryClaimer) sweep(ctx context.Context) error {
	if err := c.lookupNamespace(ctx); err != nil && !errors.Is(err, queue.ErrNotMigrated) {
		return err
	}
	mine := make(map[lockKey]bool, len(c.held))
	for _, k := range c.held {
		mine[k] = true
	}
	for range 3 {
		rows, err := c.conn.Query(ctx, c.d.stmts.heldLocks, c.mark)
		if err != nil {
			return err
		}
		locks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (lockKey, error) {
			var l lockKey
			err := r.Scan(&l.ns, &l.k)
			return l, err
		})
		if err != nil {
			return err
		}
		var nss, ks []int32
		for _, l := range locks {
			if c.nss[l.ns] && !mine[l] {
				nss, ks = append(nss, l.ns), append(ks, l.k)
			}
		}
		if len(nss) == 0 {
			return nil
		}
		// A stray lock may be held more than once; look again after.
		if _, err := c.conn.Exec(ctx, c.d.stmts.unlock, nss, ks, c.mark); err != nil {
			return err
		}
		c.swept.Add(int64(len(nss)))
	}
	return errors.New("dbq: postgres: advisory locks keep coming back")
}

// advisoryLocksHold refuses, with queue.ErrUnsupportedServer, a server
// that speaks PostgreSQL's protocol but whose advisory lock functions take
// no lock: CockroachDB accepts pg_try_advisory_lock and returns true
// without locking, so every claimer would take every job. It is told by
// the crdb_version parameter CockroachDB reports at connection start
// (param reads the connection's parameters). Not tested against a
// CockroachDB server here.
func advisoryLocksHold(param func(string) string) error {
	if v := param("crdb_version"); v != "" {
		return fmt.Errorf("%w: postgres: %s takes no advisory locks; use the SKIP LOCKED strategy "+
			"(postgres.Config{Strategy: postgres.SkipLocked}, or dbq --strategy skiplocked)", queue.ErrUnsupportedServer, v)
	}
	return nil
}

// sessionProbeWait bounds the wait for a second pool connection in
// ownSession.
const sessionProbeWait = 2 * time.Second

// ownSession refuses, with queue.ErrUnsupportedServer and the setup to use
// instead, a pool whose connections do not each have a session of their
// own: a transaction pooler (PgBouncer with pool_mode = transaction) hands
// one client connection's statements to any server connection, and the
// advisory locks taken through it land in sessions other clients then use
// (1,243 jobs of 3,000 ran twice that way). pid is the server process the
// claimer's connection reached; a second connection of the pool that
// reaches the same one shares sessions. Such a pooler reuses the server
// connection a client just left, so the probe finds it; where it does not
// (a pool with no connection to spare, other pooler settings), the session
// guard in every statement of the claimer still stops the first one that
// runs elsewhere, before it takes, checks or releases a lock. Passed once
// per Driver.
func (d *Driver) ownSession(ctx context.Context, pid int32) error {
	if d.sessionChecked.Load() {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, sessionProbeWait)
	defer cancel()
	conn, err := d.pool.Acquire(actx)
	if err != nil {
		if ctx.Err() != nil {
			return ctxErr("new claimer", ctx)
		}
		return nil // no connection to spare: the session guard stands alone
	}
	defer conn.Release()
	var other int32
	if err := conn.QueryRow(actx, d.stmts.backendPID).Scan(&other); err != nil {
		if ctx.Err() == nil && actx.Err() != nil {
			return nil // too slow an answer to probe with: the session guard stands alone
		}
		return interpret("check the session", err)
	}
	if other == pid {
		return fmt.Errorf("%w: postgres: two connections of the pool reached the same server process %d; %s",
			queue.ErrUnsupportedServer, pid, adviceAdvisory)
	}
	d.sessionChecked.Store(true)
	return nil
}
