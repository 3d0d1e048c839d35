package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
	mysqldrv "github.com/go-sql-driver/mysql"
)

// TiDB's own cases (make test-tidb-short runs them with the conformance
// suite on the shared tidb-server; they skip on MySQL and MariaDB, where
// guard_test.go stands in for TiDB with a driver wrapper). What dbq relies
// on there, each checked against the server itself:
//   - its FOR UPDATE SKIP LOCKED locks nothing, so the claim's UPDATE,
//     guarded by state = 'ready', decides (TestTiDBClaimUpdateDecides);
//   - it refuses READ UNCOMMITTED (error 8048), so claimers read their
//     candidates in READ COMMITTED (every claim here; and
//     TestTiDBRefusesReadUncommitted says the refusal still stands);
//   - an optimistic transaction that lost a race fails its COMMIT with
//     error 9007, which a claim retries (TestTiDBWriteConflictIsRetried);
//   - and the whole: Workers on pools of their own run each job once
//     (TestTiDBWorkersRunEachJobOnce).

// tidbOnly skips a test written for TiDB on any other server.
func tidbOnly(t testing.TB) {
	t.Helper()
	if hasInnoDBLocks(t) {
		t.Skip("TiDB only: on MySQL and MariaDB SKIP LOCKED locks; guard_test.go covers the guard there with a driver wrapper")
	}
}

// TestTiDBClaimUpdateDecides drives two claims' steps by hand on real
// TiDB sessions: the second claim's locking read returns the rows the
// first has locked and not yet committed (SKIP LOCKED locked nothing),
// its UPDATE waits for the first claim's row locks and then, finding the
// rows claimed, changes none. Without the state guard in claim_update.sql
// it would take every row over, and both claims would return them.
func TestTiDBClaimUpdateDecides(t *testing.T) {
	tidbOnly(t)
	t.Parallel()
	const jobs = 10
	ctx, _, q, d0, ids := jobsDatabase(t, jobs)
	a, b := newClaimer(t, q), newClaimer(t, q)
	lease := micros(time.Minute)

	txA, err := beginRC(ctx, a.conn)
	if err != nil {
		t.Fatal(err)
	}
	defer txA.Rollback()
	lockedA, err := a.lock(ctx, txA, ids, "q", lease)
	if err != nil || len(lockedA) != jobs {
		t.Fatalf("claim a's lock step: %d rows, %v", len(lockedA), err)
	}
	gotA, err := a.take(ctx, txA, lockedA, 1)
	if err != nil || len(gotA) != jobs {
		t.Fatalf("claim a's UPDATE: %d rows, %v", len(gotA), err)
	}

	txB, err := beginRC(ctx, b.conn)
	if err != nil {
		t.Fatal(err)
	}
	defer txB.Rollback()
	lockedB, err := b.lock(ctx, txB, ids, "q", lease)
	if err != nil {
		t.Fatal(err)
	}
	if len(lockedB) != jobs {
		t.Fatalf("claim b's FOR UPDATE SKIP LOCKED returned %d of the %d rows claim a has locked and changed: this TiDB's SKIP LOCKED skips locked rows (tidb#61621 fixed?); this test and docs/scale-out.md describe a TiDB whose SKIP LOCKED locks nothing",
			len(lockedB), jobs)
	}

	type result struct {
		jobs []*queue.Job
		err  error
	}
	done := make(chan result, 1)
	go func() {
		js, err := b.take(ctx, txB, lockedB, 2)
		done <- result{js, err}
	}()
	waited := waitForLockWait(ctx, t)
	if err := txA.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("claim b's UPDATE: %v", r.err)
	}
	if err := txB.Commit(); err != nil {
		t.Fatal(err)
	}
	t.Logf("claim b's locking read returned all %d rows claim a held; its UPDATE waited on a's locks: %v; it changed %d", jobs, waited, len(r.jobs))
	if len(r.jobs) != 0 {
		t.Errorf("claim b's UPDATE took %d rows claim a had claimed (first %+v): the UPDATE must change only rows still ready", len(r.jobs), *r.jobs[0])
	}
	for id, tok := range rowTokens(t, d0, ids) {
		if tok != 1 {
			t.Errorf("job %d holds token %d, want claim a's 1", id, tok)
		}
	}
}

// waitForLockWait reports whether some transaction of the server waits on
// a row lock (information_schema.DATA_LOCK_WAITS) within 5 s.
func waitForLockWait(ctx context.Context, t testing.TB) bool {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		var n int
		if err := admin(t).QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.DATA_LOCK_WAITS").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return true
		}
		if err := sleepFor(ctx, 20*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	return false
}

// TestTiDBRefusesReadUncommitted: the reason claimers read candidates in
// READ COMMITTED on TiDB still holds, and a claimer's session starts there.
func TestTiDBRefusesReadUncommitted(t *testing.T) {
	tidbOnly(t)
	t.Parallel()
	db := admin(t)
	cn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer discard(cn)
	_, err = cn.ExecContext(context.Background(), "SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED")
	if me, ok := err.(*mysqldrv.MySQLError); !ok || me.Number != 8048 {
		t.Errorf("READ UNCOMMITTED on TiDB: %v, want error 8048 (if TiDB takes it now, claimers could read candidates there)", err)
	}
	q, _ := openQueue(t, Config{}, true)
	c := newClaimer(t, q)
	var level string
	if err := c.conn.QueryRowContext(context.Background(), "SELECT @@transaction_isolation").Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != "READ-COMMITTED" {
		t.Errorf("a claimer's session on TiDB is at %s, want READ-COMMITTED", level)
	}
}

// TestTiDBWriteConflictIsRetried: on a TiDB whose transactions are
// optimistic (tidb_txn_mode, which a DBA may set for the whole server),
// two claims that go for the same rows both change them, and the second
// COMMIT fails with error 9007 (write conflict). The claim retries it and
// finds the rows gone: no error reaches the caller, each job is claimed
// once.
func TestTiDBWriteConflictIsRetried(t *testing.T) {
	tidbOnly(t)
	t.Parallel()
	const jobs = 20
	ctx, dsn, _, d0, ids := jobsDatabase(t, jobs)
	mc, err := mysqldrv.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	mc.Params = map[string]string{"tidb_txn_mode": "'optimistic'"}
	db, nl := newNoLockDB(t, mc.FormatDSN(), "SET state = 'claimed'", 2)
	q := newOn(t, db, Config{MaxSpread: 1})
	d := q.Driver().(*Driver)
	a, b := newClaimer(t, q), newClaimer(t, q)

	got := make([][]*queue.Job, 2)
	both(t, func(i int) (err error) {
		got[i], err = []*Claimer{a, b}[i].Claim(ctx, "q", jobs)
		return err
	})
	if !nl.met() {
		t.Fatal("the claims did not both reach their UPDATE: the test proves nothing")
	}
	if d.retried.Load() == 0 {
		t.Fatal("no claim was retried: the two optimistic claims did not conflict, the test proves nothing")
	}
	tokens := rowTokens(t, d0, ids)
	seen := map[int64]bool{}
	for i, js := range got {
		for _, j := range js {
			if seen[j.ID] {
				t.Errorf("job %d claimed twice", j.ID)
			}
			seen[j.ID] = true
			if tokens[j.ID] != j.Token {
				t.Errorf("claimer %d returned job %d with token %d; the row holds %d", i, j.ID, j.Token, tokens[j.ID])
			}
		}
	}
	if len(seen) != jobs {
		t.Errorf("%d distinct jobs claimed, want %d", len(seen), jobs)
	}
	t.Logf("optimistic claims: a %d jobs, b %d jobs, %d retried", len(got[0]), len(got[1]), d.retried.Load())
}

// TestTiDBWorkersRunEachJobOnce: two Workers, each on a pool of its own as
// two processes would be, drain DBQ_TIDB_JOBS jobs (default 2,000), both
// reading the same first candidates (MaxSpread 1, so that their claims
// meet as often as they can); every run is written to a ledger table. Each
// job runs exactly once and the table ends empty.
func TestTiDBWorkersRunEachJobOnce(t *testing.T) {
	tidbOnly(t)
	total := envJobs(t, "DBQ_TIDB_JOBS", 2000, 100)
	_, dsn := newDatabase(t)
	const workers = 2
	qs := make([]*queue.Queue, workers)
	ds := make([]*Driver, workers)
	for i := range qs {
		qs[i], ds[i] = openQueueOn(t, dsn, Config{MaxSpread: 1}, i == 0)
	}
	if _, err := ds[0].db.Exec("CREATE TABLE ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY, job_id BIGINT NOT NULL, worker INT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	ids := enqueueN(t, qs[0], "tidb", total, "t")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	per := make([]atomic.Int64, workers)
	errs := make(chan error, workers)
	start := time.Now()
	for i, q := range qs {
		db := ds[i].db
		w, err := queue.NewWorker(q, func(ctx context.Context, j *queue.Job) error {
			if _, err := db.ExecContext(ctx, "INSERT INTO ledger (job_id, worker) VALUES (?, ?)", j.ID, i); err != nil {
				return err
			}
			per[i].Add(1)
			return nil
		}, queue.WorkerConfig{Queue: "tidb", Concurrency: 8, PollInterval: 50 * time.Millisecond, ExitWhenEmpty: true})
		if err != nil {
			t.Fatal(err)
		}
		go func() { errs <- w.Run(ctx) }()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Errorf("Worker.Run: %v", err)
		}
	}
	elapsed := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("the Workers had not drained the queue after %v", elapsed.Round(time.Second))
	}
	checkLedger(t, ds[0].db, ds[0].stmts.jobsTable, ids)
	var claims, empties int64
	for _, d := range ds {
		e, c := d.EmptyLocks()
		claims, empties = claims+c, empties+e
	}
	t.Logf("tidb: %d jobs by %d Workers in %v (%.0f jobs/s); runs per Worker %d/%d; %d claims, %d empty, %d retried",
		total, workers, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), per[0].Load(), per[1].Load(),
		claims, empties, ds[0].retried.Load()+ds[1].retried.Load())
	if per[0].Load() == 0 || per[1].Load() == 0 {
		t.Errorf("runs per Worker %d/%d: want both Workers to run jobs", per[0].Load(), per[1].Load())
	}
}

// checkLedger fails the test unless the ledger holds exactly one run of
// each of ids and nothing else, and the jobs table is empty.
func checkLedger(t testing.TB, db *sql.DB, jobs string, ids []int64) {
	t.Helper()
	var rows, distinct, repeated, left int
	if err := db.QueryRow("SELECT COUNT(*), COUNT(DISTINCT job_id) FROM ledger").Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT COUNT(*) FROM (SELECT job_id FROM ledger GROUP BY job_id HAVING COUNT(*) > 1) r").Scan(&repeated); err != nil {
		t.Fatal(err)
	}
	missing := 0
	for start := 0; start < len(ids); start += 1000 {
		chunk := ids[start:min(start+1000, len(ids))]
		var found int
		q := fmt.Sprintf("SELECT COUNT(DISTINCT job_id) FROM ledger WHERE job_id IN (%s)", placeholders(len(chunk)))
		if err := db.QueryRow(q, anys(chunk)...).Scan(&found); err != nil {
			t.Fatal(err)
		}
		missing += len(chunk) - found
	}
	if err := db.QueryRow("SELECT COUNT(*) FROM " + jobs).Scan(&left); err != nil {
		t.Fatal(err)
	}
	t.Logf("ledger: %d rows, %d distinct jobs, %d repeated, %d missing; %d jobs left", rows, distinct, repeated, missing, left)
	if rows != len(ids) || distinct != len(ids) || repeated != 0 || missing != 0 || left != 0 {
		t.Errorf("ledger %d rows for %d distinct jobs (%d repeated, %d missing), %d jobs left; want %d runs of %d jobs, each once, none left",
			rows, distinct, repeated, missing, left, len(ids), len(ids))
	}
}
