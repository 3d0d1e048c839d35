package mssql

// Tests against a real SQL Server: the conformance suite and this
// dialect's own live tests. They run where DBQ_MSSQL_DSN (default: the
// mssql service of docker-compose.yml) answers and skip, saying how to get
// one, where it does not — or fail, when DBQ_REQUIRE names mssql.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/integration"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/queue"
	"github.com/pressly/goose/v3"
)

const howToRun = "start one with `docker compose up -d --wait mssql` at the repository root, or run `make test-compose`"

var live = sync.OnceValues(func() (*sql.DB, error) {
	db, err := OpenDB(dbtest.DSN(dialect.MSSQL))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
})

// liveDB returns the test server's database, or ends the test.
func liveDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := live()
	if err != nil {
		dbtest.Unreachable(t, dialect.MSSQL, fmt.Errorf("%w; %s", err, howToRun))
	}
	return db
}

func liveCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newLiveQueue returns a Queue over tables in a fresh schema of db, dropped
// at cleanup; migrated unless migrate is false.
func newLiveQueue(t *testing.T, db *sql.DB, cfg Config, migrate bool) *queue.Queue {
	t.Helper()
	cfg.Schema, cfg.Prefix = dbtest.UniqueName("dbq"), ""
	ctx := liveCtx(t)
	t.Cleanup(func() { dropSchema(t, db, cfg.Names()) })
	if migrate {
		if err := Migrate(ctx, db, cfg); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}
	q, err := New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	q.Driver().(*Driver).trackTokens = true
	t.Cleanup(func() { q.Close() })
	return q
}

// poolSessions holds n connections of db at once and reads, for each, the
// settings a statement could leave behind on SQL Server: lock timeout,
// @@OPTIONS (XACT_ABORT, NOCOUNT, ANSI and arithmetic options), open
// transactions and isolation level.
func poolSessions(t *testing.T, db *sql.DB, n int) []map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := make([]map[string]string, n)
	for i := range n {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, n, err)
		}
		defer c.Close()
		var lockTimeout, options, trancount, isolation string
		if err := c.QueryRowContext(ctx, `SELECT @@LOCK_TIMEOUT, @@OPTIONS, @@TRANCOUNT,
			(SELECT transaction_isolation_level FROM sys.dm_exec_sessions WHERE session_id = @@SPID)`).
			Scan(&lockTimeout, &options, &trancount, &isolation); err != nil {
			t.Fatalf("session settings: %v", err)
		}
		out[i] = map[string]string{"lock_timeout": lockTimeout, "options": options, "trancount": trancount, "isolation": isolation}
	}
	return out
}

// claimedWithTokens lists the rows of jobs_inflight claimed under any
// token c ever used: a claimer holds no locks between calls, so what it
// holds in the database are these rows.
func claimedWithTokens(t *testing.T, db *sql.DB, c *Claimer) []int64 {
	t.Helper()
	c.mu.Lock()
	var tokens []string
	for tok := range c.issued {
		tokens = append(tokens, fmt.Sprint(tok))
	}
	c.mu.Unlock()
	if len(tokens) == 0 {
		return nil
	}
	n := c.d.cfg.Names()
	ids, err := dialect.QueryIDs(context.Background(), db, fmt.Sprintf("SELECT id FROM %s WHERE claim_token IN (%s)",
		n.Qualified(dialect.MSSQL, n.Prefix+"jobs_inflight"), strings.Join(tokens, ", ")))
	if err != nil {
		t.Fatalf("claimed rows: %v", err)
	}
	slices.Sort(ids)
	return ids
}

func dropSchema(t *testing.T, db *sql.DB, n dialect.Names) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := func(table string) string { return n.Qualified(dialect.MSSQL, n.Prefix+table) }
	for _, stmt := range []string{
		"DROP TABLE IF EXISTS " + q("jobs_dedupe"),
		"DROP TABLE IF EXISTS " + q("jobs_inflight"),
		"DROP TABLE IF EXISTS " + q("jobs"),
		"DROP TABLE IF EXISTS " + q("queues"),
		"DROP TABLE IF EXISTS " + q("schedules"),
		"DROP TABLE IF EXISTS " + q("activity"),
		"DROP TABLE IF EXISTS " + q("processes"),
		"DROP TABLE IF EXISTS " + q("schema_version"),
		"DROP SEQUENCE IF EXISTS " + q("jobs_id_seq"),
		"DROP SCHEMA IF EXISTS " + dialect.Quote(dialect.MSSQL, n.Schema),
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Errorf("cleanup: %s: %v", stmt, err)
		}
	}
}

func harness(t *testing.T, db *sql.DB, base Config) integration.Harness {
	window := 0
	if base.Strategy == DeleteTop {
		window = base.WithDefaults().Window
	}
	return integration.Harness{
		Dialect:     "mssql",
		ClaimWindow: window,
		NewQueue: func(t *testing.T, cfg queue.Config, migrate bool) *queue.Queue {
			c := base
			c.Config = cfg
			return newLiveQueue(t, db, c, migrate)
		},
		Migrator: func(t *testing.T, q *queue.Queue) *goose.Provider {
			p, err := migrations.NewProvider(liveCtx(t), dialect.MSSQL, db, q.Config().Names())
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		// A claimer holds no connection: killing its process leaves its
		// leases to expire, which is what kill models.
		Kill: func(t *testing.T, c queue.Claimer) { c.(*Claimer).kill() },
		// A lease dialect holds no locks between calls; what it holds in
		// the database are the rows claimed under its tokens, and those
		// must be exactly the jobs it claimed and still holds.
		HeldLocks: func(t *testing.T, c queue.Claimer) []int64 { return claimedWithTokens(t, db, c.(*Claimer)) },
		// New on a *sql.DB of the user's, with room for a Worker; every
		// connection it holds stays idle in it.
		UserPool: func(t *testing.T, cfg queue.Config) (*queue.Queue, func(*testing.T) []map[string]string) {
			const size = 6
			udb, err := sql.Open("sqlserver", dbtest.DSN(dialect.MSSQL))
			if err != nil {
				t.Fatal(err)
			}
			udb.SetMaxOpenConns(size)
			udb.SetMaxIdleConns(size)
			t.Cleanup(func() { udb.Close() })
			c := base
			c.Config = cfg
			q := newLiveQueue(t, udb, c, true)
			return q, func(t *testing.T) []map[string]string { return poolSessions(t, udb, size) }
		},
		InsertRaw: func(t *testing.T, q *queue.Queue, cols map[string]any) {
			insertRaw(t, db, q, cols)
		},
		// The application's own transaction on the pool q uses, which
		// EnqueueTx joins inside a savepoint.
		Tx: func(t *testing.T, q *queue.Queue) (any, func() error) {
			tx, err := db.BeginTx(liveCtx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tx.Rollback() }) // after Commit: nothing to do
			return tx, tx.Commit
		},
	}
}

func TestConformance(t *testing.T) {
	db := liveDB(t)
	for _, s := range []Strategy{DeleteTop, UpdLock} {
		t.Run(s.String(), func(t *testing.T) {
			integration.Run(t, harness(t, db, Config{Strategy: s}))
		})
	}
}

// A claim beside rows another claim is taking — deleted, not yet committed
// — neither waits for them nor picks them and fails with 1222, with read
// committed snapshot off (the SQL Server default) and on (the Azure SQL
// default). This is what READPAST, READCOMMITTEDLOCK on the inner reference
// and FORCESEEK on the DELETE are for; with one attempt, a 1222 fails the
// test instead of hiding in a retry.
//
// On Babelfish for PostgreSQL it shows the difference instead (see
// testBabelfishClaimWaits).
func TestLiveClaimSkipsLockedRows(t *testing.T) {
	db := liveDB(t)
	if liveBabelfish(t, db) {
		for _, s := range []Strategy{DeleteTop, UpdLock} {
			t.Run("babelfish/"+s.String(), func(t *testing.T) { testBabelfishClaimWaits(t, db, s) })
		}
		return
	}
	rcsi := rcsiDatabase(t)
	for _, mode := range []struct {
		name string
		db   func() *sql.DB
	}{{"rcsi-off", func() *sql.DB { return db }}, {"rcsi-on", rcsi}} {
		for _, s := range []Strategy{DeleteTop, UpdLock} {
			t.Run(mode.name+"/"+s.String(), func(t *testing.T) {
				db := mode.db()
				ctx := liveCtx(t)
				q := newLiveQueue(t, db, Config{Strategy: s, ClaimAttempts: 1}, true)
				ids, err := q.Enqueue(ctx, make20("skip")...)
				if err != nil {
					t.Fatal(err)
				}
				locked := ids[:5] // the head of the queue, inside any window
				n := q.Config().Names()
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback()
				// What a claim in progress does to its rows: delete them,
				// uncommitted, holding exclusive locks on every index's keys.
				res, err := tx.ExecContext(ctx, fmt.Sprintf(
					"DELETE FROM %s WITH (ROWLOCK) WHERE id IN (%d, %d, %d, %d, %d)",
					n.Qualified(dialect.MSSQL, n.Prefix+"jobs"), locked[0], locked[1], locked[2], locked[3], locked[4]))
				if err != nil {
					t.Fatalf("lock rows: %v", err)
				}
				if k, _ := res.RowsAffected(); k != 5 {
					t.Fatalf("locked %d rows, want 5", k)
				}
				c, _ := q.NewClaimer(ctx)
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				start := time.Now()
				jobs, err := c.Claim(cctx, "skip", 20)
				if err != nil {
					t.Fatalf("Claim beside locked rows: %v (after %v)", err, time.Since(start))
				}
				if len(jobs) != 15 {
					t.Fatalf("claimed %d jobs, want the 15 unlocked", len(jobs))
				}
				for _, j := range jobs {
					if slices.Contains(locked, j.ID) {
						t.Fatalf("claimed locked job %d", j.ID)
					}
				}
				t.Logf("claimed 15 beside 5 locked rows in %v", time.Since(start))
			})
		}
	}
}

// liveBabelfish reports whether the test server is Babelfish for
// PostgreSQL.
func liveBabelfish(t *testing.T, db *sql.DB) bool {
	var v sql.NullInt64
	if err := db.QueryRowContext(liveCtx(t), babelfishQuery).Scan(&v); err != nil {
		t.Fatalf("%s: %v", babelfishQuery, err)
	}
	return v.Valid && v.Int64 == 1
}

// testBabelfishClaimWaits: a Babelfish difference. Babelfish has no
// READPAST and no READ_COMMITTED_SNAPSHOT database option (ALTER DATABASE
// is not supported there), and locking is PostgreSQL's: a claim beside
// rows another transaction has deleted, uncommitted, picks them from the
// committed version. With LOCK_TIMEOUT 0 in place of NOWAIT it fails at
// once with a retryable error instead of skipping them; once the
// transaction rolls back it takes them all, and the failed claim left
// nothing claimed.
// https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/babelfish-compatibility.tsql.limitations.html
func testBabelfishClaimWaits(t *testing.T, db *sql.DB, s Strategy) {
	ctx := liveCtx(t)
	q := newLiveQueue(t, db, Config{Strategy: s, ClaimAttempts: 1}, true)
	ids, err := q.Enqueue(ctx, make20("wait")...)
	if err != nil {
		t.Fatal(err)
	}
	n := q.Config().Names()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE id IN (%d, %d, %d, %d, %d)",
		n.Qualified(dialect.MSSQL, n.Prefix+"jobs"), ids[0], ids[1], ids[2], ids[3], ids[4])); err != nil {
		t.Fatalf("lock rows: %v", err)
	}
	c, _ := q.NewClaimer(ctx)
	if jobs, err := c.Claim(ctx, "wait", 20); !queue.IsRetryable(err) {
		t.Fatalf("Claim beside locked rows: %d jobs, %v; want a retryable lock timeout (Babelfish has no READPAST)", len(jobs), err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Claim(ctx, "wait", 20)
	if err != nil || len(jobs) != 20 {
		t.Fatalf("Claim after the rollback: %d jobs, %v; want all 20 (nothing left claimed by the claim that waited)", len(jobs), err)
	}
}

func make20(queueName string) []queue.NewJob {
	jobs := make([]queue.NewJob, 20)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: queueName, Payload: []byte{byte(i)}}
	}
	return jobs
}

// rcsiDatabase creates a database with read committed snapshot on and
// returns a func that opens it; both dropped at cleanup.
func rcsiDatabase(t *testing.T) func() *sql.DB {
	db := liveDB(t)
	ctx := liveCtx(t)
	name := dbtest.UniqueName("dbq_rcsi")
	q := dialect.Quote(dialect.MSSQL, name)
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+q); err != nil {
		t.Fatalf("CREATE DATABASE %s: %v", q, err)
	}
	// Dropped even when a later step fails; registered first, so it runs
	// after the cleanup that closes rdb.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, stmt := range []string{"ALTER DATABASE " + q + " SET SINGLE_USER WITH ROLLBACK IMMEDIATE", "DROP DATABASE " + q} {
			if _, err := db.ExecContext(ctx, stmt); err != nil {
				t.Errorf("%s: %v", stmt, err)
			}
		}
	})
	if _, err := db.ExecContext(ctx, "ALTER DATABASE "+q+" SET READ_COMMITTED_SNAPSHOT ON WITH ROLLBACK IMMEDIATE"); err != nil {
		t.Fatalf("read committed snapshot on %s: %v", q, err)
	}
	u, err := url.Parse(dbtest.DSN(dialect.MSSQL))
	if err != nil {
		t.Fatal(err)
	}
	v := u.Query()
	v.Set("database", name)
	u.RawQuery = v.Encode()
	rdb, err := OpenDB(u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	var on bool
	if err := rdb.QueryRowContext(ctx, "SELECT is_read_committed_snapshot_on FROM sys.databases WHERE name = DB_NAME()").Scan(&on); err != nil || !on {
		t.Fatalf("read committed snapshot on: %v, %v", on, err)
	}
	return func() *sql.DB { return rdb }
}

// Ids come back in input order and stay with their jobs; a duplicate in
// the caller's transaction is undone to the savepoint and the transaction
// goes on.
func TestLiveEnqueueOrderAndSavepoint(t *testing.T) {
	db := liveDB(t)
	ctx := liveCtx(t)
	q := newLiveQueue(t, db, Config{}, true)
	jobs := make([]queue.NewJob, 3*enqueueChunk+1)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: "order", Payload: fmt.Appendf(nil, "%d", i), Priority: int16(i % 7)}
	}
	ids, err := q.Enqueue(ctx, jobs...)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{}
	for i, id := range ids {
		want[id] = string(jobs[i].Payload)
	}
	c, _ := q.NewClaimer(ctx)
	for got := 0; got < len(jobs); {
		batch, err := c.Claim(ctx, "order", MaxClaim)
		if err != nil || len(batch) == 0 {
			t.Fatalf("Claim: %d, %v", len(batch), err)
		}
		for _, j := range batch {
			if want[j.ID] != string(j.Payload) {
				t.Fatalf("id %d has payload %q, Enqueue said %q", j.ID, j.Payload, want[j.ID])
			}
		}
		got += len(batch)
		if err := c.Complete(ctx, leasesOf(batch)); err != nil {
			t.Fatal(err)
		}
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := q.EnqueueTx(ctx, tx, queue.NewJob{Queue: "tx", DedupeKey: "a"}); err != nil {
		t.Fatal(err)
	}
	_, err = q.EnqueueTx(ctx, tx, queue.NewJob{Queue: "tx", DedupeKey: "b"}, queue.NewJob{Queue: "tx", DedupeKey: "a"})
	if !errors.Is(err, queue.ErrDuplicate) {
		t.Fatalf("duplicate in the caller's transaction: %v", err)
	}
	if _, err := q.EnqueueTx(ctx, tx, queue.NewJob{Queue: "tx", DedupeKey: "b"}); err != nil {
		t.Fatalf("after the savepoint rollback: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	st, err := q.Stats(ctx)
	if err != nil || len(st) != 1 || st[0].Queue != "tx" || st[0].Ready != 2 {
		t.Fatalf("stats %+v, %v; want 2 ready in tx", st, err)
	}
}

// A dedupe key stays taken while its job moves between the tables — held,
// retried, released, rescued — and is free once the job completes.
func TestLiveDedupeFollowsTheJob(t *testing.T) {
	db := liveDB(t)
	ctx := liveCtx(t)
	q := newLiveQueue(t, db, Config{Config: queue.Config{Lease: time.Second}}, true)
	dup := func(step string) {
		t.Helper()
		if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "d", DedupeKey: "k"}); !errors.Is(err, queue.ErrDuplicate) {
			t.Fatalf("%s: enqueue of the same key: %v", step, err)
		}
	}
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "d", DedupeKey: "k"}); err != nil {
		t.Fatal(err)
	}
	dup("ready")
	c, _ := q.NewClaimer(ctx)
	claim1 := func() *queue.Job {
		t.Helper()
		jobs, err := c.Claim(ctx, "d", 1)
		if err != nil || len(jobs) != 1 || jobs[0].DedupeKey != "k" {
			t.Fatalf("Claim: %v, %v", jobs, err)
		}
		return jobs[0]
	}
	j := claim1()
	dup("held")
	if err := c.Retry(ctx, []queue.RetryParams{{Lease: j.Lease(), Error: "x"}}); err != nil {
		t.Fatal(err)
	}
	dup("retried")
	j = claim1()
	if j.Attempt != 1 || j.LastError != "x" {
		t.Fatalf("after retry: attempt %d, last_error %q", j.Attempt, j.LastError)
	}
	if err := c.Release(ctx, []queue.Lease{j.Lease()}); err != nil {
		t.Fatal(err)
	}
	dup("released")
	j = claim1()
	time.Sleep(1500 * time.Millisecond)
	d := q.Driver().(*Driver)
	if n, err := d.Rescue(ctx); err != nil || n != 1 {
		t.Fatalf("Rescue: %d, %v", n, err)
	}
	dup("rescued")
	if err := c.Complete(ctx, []queue.Lease{j.Lease()}); !errors.Is(err, queue.ErrLeaseLost) {
		t.Fatalf("Complete after rescue: %v", err)
	}
	j = claim1()
	if j.Attempt != 2 || j.LastError != rescueError {
		t.Fatalf("after rescue: attempt %d, last_error %q; the lost lease counts as a failed run", j.Attempt, j.LastError)
	}
	if err := c.Complete(ctx, []queue.Lease{j.Lease()}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "d", DedupeKey: "k"}); err != nil {
		t.Fatalf("after completion the key is free: %v", err)
	}
}

var leasesOf = queue.Leases

// insertRaw inserts a job as a producer does from sqlcmd: DATETIME2 holds
// UTC, and a dedupe key is recorded in the dedupe table in the same
// transaction (no trigger can do it: jobs is an OUTPUT INTO target).
func insertRaw(t *testing.T, db *sql.DB, q *queue.Queue, cols map[string]any) {
	t.Helper()
	if at, ok := cols["run_at"].(time.Time); ok {
		cols["run_at"] = at.UTC()
	}
	n := q.Config().Names()
	stmt, args := integration.InsertStatement(n.Qualified(dialect.MSSQL, n.Jobs()), cols,
		func(i int) string { return fmt.Sprintf("@p%d", i) })
	stmt = strings.Replace(stmt, ") VALUES (", ") OUTPUT inserted.id VALUES (", 1)
	ctx := liveCtx(t)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var id int64
	if err := tx.QueryRowContext(ctx, stmt, args...).Scan(&id); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
	if key, ok := cols["dedupe_key"]; ok {
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+n.Qualified(dialect.MSSQL, n.Prefix+"jobs_dedupe")+
			" (queue, dedupe_key, id) VALUES (@p1, @p2, @p3)", cols["queue"], key, id); err != nil {
			t.Fatalf("dedupe key: %v", err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}
