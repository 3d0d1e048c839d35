package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
	mysqldrv "github.com/go-sql-driver/mysql"
)

// Galera: DBQ_MYSQL_DSNS lists the DSNs of several nodes of one Galera
// cluster (scripts/galera.sh dsns prints them; make test-galera sets it).
// Then TestConformance opens each queue on the next node in turn, its
// database made on that node, so the suite runs on every node, and
// TestGaleraWorkersOnEveryNode runs a Worker per node on one table.
// DBQ_MYSQL_DSN stays the server of the other tests (make test-galera sets
// it to node 1). A test that needs the cluster skips without it, or fails
// when DBQ_REQUIRE names galera.

const galeraName dialect.Name = "galera"

// galeraDSNs returns DBQ_MYSQL_DSNS split at commas (nil when unset).
func galeraDSNs() []string {
	var out []string
	for _, s := range strings.Split(os.Getenv("DBQ_MYSQL_DSNS"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// galeraNodes returns an admin pool and the driver-form DSN (no database)
// of each node of DBQ_MYSQL_DSNS, or ends the test when there are fewer
// than two or one does not answer.
func galeraNodes(t testing.TB) []galeraNode {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a Galera cluster; skipped in -short mode")
	}
	dsns := galeraDSNs()
	if len(dsns) < 2 {
		msg := "DBQ_MYSQL_DSNS does not list two or more Galera nodes (make test-galera starts a cluster and sets it)"
		if dbtest.Required(galeraName) {
			t.Fatalf("%s; DBQ_REQUIRE names galera", msg)
		}
		t.Skip(msg)
	}
	nodesMu.Lock()
	defer nodesMu.Unlock()
	out := make([]galeraNode, len(dsns))
	for i, dsn := range dsns {
		n, ok := nodes[dsn]
		if !ok {
			var err error
			if n, err = openNode(dsn); err != nil {
				msg := fmt.Sprintf("Galera node %s: %s", dialect.Redact(dsn), dialect.Redact(err.Error()))
				if dbtest.Required(galeraName) || !dbtest.CannotConnect(err) {
					t.Fatal(msg)
				}
				t.Skip(msg)
			}
			nodes[dsn] = n
		}
		out[i] = n
	}
	return out
}

type galeraNode struct {
	db *sql.DB
	mc *mysqldrv.Config // no database selected
}

var (
	nodesMu sync.Mutex
	nodes   = map[string]galeraNode{}
	nextNod atomic.Int64 // the node of the next conformance queue
)

func openNode(dsn string) (galeraNode, error) {
	form, err := driverForm(dsn)
	if err != nil {
		return galeraNode{}, err
	}
	mc, err := mysqldrv.ParseDSN(form)
	if err != nil {
		return galeraNode{}, err
	}
	mc.DBName = ""
	mc.InterpolateParams = true
	c, err := mysqldrv.NewConnector(mc)
	if err != nil {
		return galeraNode{}, err
	}
	db := sql.OpenDB(c)
	db.SetMaxIdleConns(8)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var on string
	if err := db.QueryRowContext(ctx, "SELECT @@wsrep_on").Scan(&on); err != nil {
		db.Close()
		return galeraNode{}, err
	}
	if on != "1" && !strings.EqualFold(on, "ON") {
		db.Close()
		return galeraNode{}, fmt.Errorf("wsrep_on is %s: not a Galera node", on)
	}
	return galeraNode{db: db, mc: mc}, nil
}

// galeraDatabase makes a database of the test's own on node i (dropped at
// cleanup), waits until every node has it, and returns its name and the
// driver-form DSN of each node that selects it.
func galeraDatabase(t testing.TB, ns []galeraNode, i int) (string, []string) {
	t.Helper()
	name := dbtest.UniqueName("dbq_gal")
	q := dialect.Quote(dialect.MySQL, name)
	if _, err := ns[i].db.Exec("CREATE DATABASE " + q); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		if _, err := ns[i].db.Exec("DROP DATABASE IF EXISTS " + q); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	dsns := make([]string, len(ns))
	for k, n := range ns {
		waitVisible(t, n.db, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name)
		mc := n.mc.Clone()
		mc.DBName = name
		dsns[k] = mc.FormatDSN()
	}
	return name, dsns
}

// waitVisible waits (10 s at most) until query, a COUNT, finds a row on
// db: DDL reaches the other nodes of a Galera cluster a moment later.
func waitVisible(t testing.TB, db *sql.DB, query string, args ...any) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		var n int
		if err := db.QueryRow(query, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %v: still nothing after 10s", query, args)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// galeraQueue is the conformance harness's NewQueue on a cluster: the
// queue is opened on the next node in turn, in a database made there.
func galeraQueue(t testing.TB, cfg Config, migrate bool) (*queue.Queue, *Driver) {
	t.Helper()
	ns := galeraNodes(t)
	i := int(nextNod.Add(1)-1) % len(ns)
	_, dsns := galeraDatabase(t, ns, i)
	return openQueueOn(t, dsns[i], cfg, migrate)
}

// galeraKill kills a claimer's session on its own node, through its
// driver's pool (a session id means something on one node only).
func galeraKill(t testing.TB, c *Claimer) {
	t.Helper()
	if id := sessionOf(c); id != 0 {
		if _, err := c.d.db.Exec(fmt.Sprintf("KILL CONNECTION %d", id)); err != nil {
			t.Fatalf("KILL CONNECTION %d: %v", id, err)
		}
	}
}

// galeraOpenTrx lists the InnoDB transactions open on a claimer's session,
// read on its node; one seen COMMITTING is ending, so it looks again.
func galeraOpenTrx(t testing.TB, c *Claimer) []string {
	t.Helper()
	id := sessionOf(c)
	var out []string
	for range 20 {
		time.Sleep(110 * time.Millisecond) // INNODB_TRX is a snapshot refreshed every 100 ms
		rows, err := c.d.db.Query(`SELECT trx_id, trx_state FROM information_schema.INNODB_TRX
			WHERE trx_mysql_thread_id = ?`, id)
		if err != nil {
			t.Fatalf("INNODB_TRX: %v", err)
		}
		out = out[:0]
		ending := true
		for rows.Next() {
			var trx, state string
			if err := rows.Scan(&trx, &state); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("session %d: open transaction %s (%s)", id, trx, state))
			ending = ending && state == "COMMITTING"
		}
		rows.Close()
		if len(out) == 0 || !ending {
			break
		}
	}
	return out
}

// envJobs returns the number of jobs that environment variable env
// names, def when it is unset; a value that is not a number of at least
// least ends the test.
func envJobs(t testing.TB, env string, def, least int) int {
	t.Helper()
	s := os.Getenv(env)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < least {
		t.Fatalf("%s=%q: want a number of jobs, %d or more", env, s, least)
	}
	return n
}

// logCount counts a logger's records by message, at every level.
type logCount struct {
	mu   sync.Mutex
	msgs map[string]int
	errs map[string]int // the "err" attribute of warnings
}

func newLogCount() *logCount { return &logCount{msgs: map[string]int{}, errs: map[string]int{}} }

func (l *logCount) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCount) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logCount) WithGroup(string) slog.Handler            { return l }
func (l *logCount) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs[r.Level.String()+" "+r.Message]++
	if r.Level >= slog.LevelWarn {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" {
				l.errs[a.Value.String()]++
			}
			return true
		})
	}
	return nil
}

func (l *logCount) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for m, c := range l.msgs {
		if strings.HasPrefix(m, prefix) {
			n += c
		}
	}
	return n
}

// TestGaleraWorkersOnEveryNode: 5,000 jobs (DBQ_GALERA_JOBS) enqueued
// through node 2, one Worker per node on the same table: every job runs
// exactly once (a ledger table, written by the handlers on their own
// node, has one row per job), certification conflicts are retried in the
// claim and counted, and the jobs are spread over the nodes.
func TestGaleraWorkersOnEveryNode(t *testing.T) {
	ns := galeraNodes(t)
	total := envJobs(t, "DBQ_GALERA_JOBS", 5000, 100)
	_, dsns := galeraDatabase(t, ns, 0)
	logs := newLogCount()
	cfg := Config{Config: queue.Config{Logger: slog.New(logs), Lease: time.Minute}}
	qs := make([]*queue.Queue, len(ns))
	ds := make([]*Driver, len(ns))
	for i := range ns {
		qs[i], ds[i] = openQueueOn(t, dsns[i], cfg, i == 0)
		if !ds[i].Server().Galera {
			t.Fatalf("node %d: Server().Galera is false on %s", i+1, ds[i].Server().Version)
		}
	}
	jobs := ds[0].stmts.jobsTable
	if _, err := ds[0].db.Exec("CREATE TABLE ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY, job_id BIGINT NOT NULL, node INT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		waitVisible(t, d.db, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ('ledger', ?)",
			strings.Trim(jobs[strings.LastIndex(jobs, ".")+1:], "`"))
	}

	start := time.Now()
	ids := enqueueN(t, qs[min(1, len(qs)-1)], "galera", total, "g")
	t.Logf("enqueued %d jobs through node %d in %v", len(ids), min(2, len(qs)), time.Since(start).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	var (
		ran    atomic.Int64
		perRun = make([]atomic.Int64, len(ns))
		wg     sync.WaitGroup
		errs   = make(chan error, len(ns))
	)
	start = time.Now()
	for i, q := range qs {
		db := ds[i].db
		w, err := queue.NewWorker(q, func(ctx context.Context, j *queue.Job) error {
			if _, err := db.ExecContext(ctx, "INSERT INTO ledger (job_id, node) VALUES (?, ?)", j.ID, i+1); err != nil {
				return err
			}
			perRun[i].Add(1)
			ran.Add(1)
			return nil
		}, queue.WorkerConfig{Queue: "galera", Concurrency: 8, PollInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(runCtx); err != nil {
				errs <- fmt.Errorf("worker on node %d: %w", i+1, err)
			}
		}()
	}
	for ran.Load() < int64(total) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	elapsed := time.Since(start)
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// The ledger, read on node 1: one row per job, for exactly the jobs enqueued.
	var rows, distinct, repeated int
	if err := ds[0].db.QueryRow("SELECT COUNT(*), COUNT(DISTINCT job_id) FROM ledger").Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if err := ds[0].db.QueryRow("SELECT COUNT(*) FROM (SELECT job_id FROM ledger GROUP BY job_id HAVING COUNT(*) > 1) r").Scan(&repeated); err != nil {
		t.Fatal(err)
	}
	var missing int
	for start := 0; start < len(ids); start += 1000 {
		chunk := ids[start:min(start+1000, len(ids))]
		var found int
		q := "SELECT COUNT(DISTINCT job_id) FROM ledger WHERE job_id IN (" + strings.TrimSuffix(strings.Repeat("?,", len(chunk)), ",") + ")"
		if err := ds[0].db.QueryRow(q, anys(chunk)...).Scan(&found); err != nil {
			t.Fatal(err)
		}
		missing += len(chunk) - found
	}
	var left int
	waitFor := time.Now().Add(10 * time.Second)
	for {
		if err := ds[0].db.QueryRow("SELECT COUNT(*) FROM " + jobs).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 || time.Now().After(waitFor) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	per := make([]string, len(ns))
	var conflicts, claims, empties, retried int64
	for i, d := range ds {
		per[i] = fmt.Sprintf("node %d: %d", i+1, perRun[i].Load())
		e, c := d.EmptyLocks()
		conflicts, claims, empties, retried = conflicts+d.Conflicts(), claims+c, empties+e, retried+d.retried.Load()
	}
	warnClaim := logs.count("WARN dbq: claim failed")
	t.Logf("galera: %d jobs by %d workers (one per node) in %v (%.0f jobs/s); jobs per node: %s",
		total, len(ns), elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), strings.Join(per, ", "))
	t.Logf("galera: ledger %d rows for %d distinct jobs, %d repeated, %d missing; %d jobs left in the table",
		rows, distinct, repeated, missing, left)
	t.Logf("galera: %d claims, %d certification conflicts retried at once (%.1f per 1,000 claims), %d other retries, %d empty locks, %d claim-failed warnings",
		claims, conflicts, 1000*float64(conflicts)/float64(max(claims, 1)), retried, empties, warnClaim)
	if warnClaim > 0 {
		t.Logf("galera: warnings by error: %v", logs.errs)
	}

	if rows != total || distinct != total || repeated != 0 || missing != 0 {
		t.Errorf("ledger: %d rows, %d distinct jobs, %d repeated, %d missing; want %d runs of %d jobs, each once",
			rows, distinct, repeated, missing, total, total)
	}
	if left != 0 {
		t.Errorf("%d jobs still in %s after every job ran", left, jobs)
	}
	busy := 0
	for i := range ns {
		if perRun[i].Load() > 0 {
			busy++
		}
	}
	if busy < 2 {
		t.Errorf("jobs per node %s: want the work spread over the nodes", strings.Join(per, ", "))
	}
	// A claim that still conflicts after its immediate retries reaches the
	// Worker, which logs it and claims again: 17-25 per 5,000 jobs with
	// the dedupe index before schema version 00007 (see docs/mysql.md, Galera),
	// none in three runs since. Any other failure is a fault.
	logs.mu.Lock()
	for e, n := range logs.errs {
		if !strings.Contains(e, "Error 1213") {
			t.Errorf("%d warnings: %s", n, e)
		}
	}
	logs.mu.Unlock()
}
