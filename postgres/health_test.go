package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5/pgxpool"
)

// holdSnapshot opens a REPEATABLE READ transaction on a connection of its
// own, takes its snapshot and leaves it idle in transaction until t ends;
// it returns the session's pid.
func holdSnapshot(t *testing.T, app string) int {
	t.Helper()
	ctx := testCtx(t)
	conn, err := testPool(t).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "ROLLBACK")
		conn.Release()
	})
	if _, err := conn.Exec(ctx, "SET application_name = '"+app+"'"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// holderOf returns the session pid among h's holders.
func holderOf(h queue.Health, pid int) (queue.HorizonHolder, bool) {
	for _, x := range h.Holders {
		if x.Kind == queue.HolderSession && x.PID == pid {
			return x, true
		}
	}
	return queue.HorizonHolder{}, false
}

func health(t *testing.T, q *queue.Queue) queue.Health {
	t.Helper()
	h, err := q.Health(testCtx(t))
	if err != nil {
		t.Fatalf("Health: %v", err)
	}
	return h
}

// TestHealthReportsAHeldSnapshot: a REPEATABLE READ transaction idle after
// its first statement is a holder of the horizon, with its pid, state,
// application and an age of at least the time it has been held; the
// horizon probe fails with a threshold below that age and passes with one
// above.
func TestHealthReportsAHeldSnapshot(t *testing.T) {
	t.Parallel()
	const hold = 1500 * time.Millisecond
	pid := holdSnapshot(t, "dbq-health-test")
	time.Sleep(hold)
	short := newQueue(t, Config{HorizonWarn: time.Second}, true)
	h := health(t, short)
	x, ok := holderOf(h, pid)
	if !ok {
		t.Fatalf("the held snapshot's session %d is not among the holders %+v", pid, h.Holders)
	}
	if x.State != "idle in transaction" || x.Application != "dbq-health-test" || x.User != "postgres" {
		t.Errorf("holder %+v: want idle in transaction, application dbq-health-test, user postgres", x)
	}
	if x.Age < hold || x.XIDAge < 0 || x.Since.IsZero() {
		t.Errorf("holder %+v: want an age of at least %v", x, hold)
	}
	if old, _ := h.Oldest(); old.Age < hold {
		t.Errorf("Oldest() = %+v, younger than the held snapshot", old)
	}
	if !h.FullView {
		t.Error("a superuser is told it does not see every session in full")
	}
	if got := probe(t, short, "horizon"); got.OK || got.Fix == "" {
		t.Errorf("horizon probe with HorizonWarn 1s, a snapshot held %v: %+v; want failed with a fix", hold, got)
	}
	long := newQueue(t, Config{HorizonWarn: time.Hour}, true)
	if got := probe(t, long, "horizon"); !got.OK {
		t.Errorf("horizon probe with HorizonWarn 1h: %+v; want ok", got)
	}
}

// probe runs queue.Check on q and returns the probe named name.
func probe(t *testing.T, q *queue.Queue, name string) queue.CheckResult {
	t.Helper()
	for _, r := range queue.Check(testCtx(t), q) {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("queue.Check ran no %q probe", name)
	return queue.CheckResult{}
}

// TestHealthCountsDeadRows: jobs deleted are counted as dead rows once the
// deleting session's statistics are flushed; ANALYZE is seen.
func TestHealthCountsDeadRows(t *testing.T) {
	t.Parallel()
	q := newQueue(t, Config{}, true)
	if h := health(t, q); h.Table.DeadRows != 0 || !h.Table.LastAnalyze.IsZero() || !h.Table.LastAutovacuum.IsZero() {
		t.Fatalf("a fresh table: %+v", h.Table)
	}
	enqueueN(t, q, "dead", 500)
	ctx := testCtx(t)
	conn, err := testPool(t).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// The statistics of a backend reach shared memory when it goes idle,
	// at most once a second unless a flush is forced (PostgreSQL 15+).
	for _, sql := range []string{"DELETE FROM " + driverOf(t, q).Table(), "ANALYZE " + driverOf(t, q).Table(), "SELECT pg_stat_force_next_flush()"} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	var h queue.Health
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if h = health(t, q); h.Table.DeadRows >= 500 {
			break
		}
	}
	if h.Table.DeadRows < 500 || h.Table.LiveRows != 0 || h.Table.LastAnalyze.IsZero() {
		t.Fatalf("after deleting 500 jobs and ANALYZE: %+v; want ≥ 500 dead, 0 live, analyzed", h.Table)
	}
	if r := probe(t, q, "dead rows"); !r.OK || !strings.Contains(r.Saw, "dead") {
		t.Errorf("dead rows probe with %d dead rows: %+v; want ok (below %d)", h.Table.DeadRows, r, queue.DeadRowsWarn)
	}
}

// TestHealthWithoutPrivileges: a role without pg_read_all_stats is told it
// does not see every session in full, and sees another role's held
// snapshot with its pid and user but no state or start, so no age;
// granted pg_read_all_stats it sees those too. The table statistics need
// no grant beyond using the schema.
func TestHealthWithoutPrivileges(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	ctx := testCtx(t)
	cfg := Config{}
	cfg.Schema = newSchema(t, pool)
	if err := Migrate(ctx, pool, cfg); err != nil {
		t.Fatal(err)
	}
	role := dbtest.UniqueName("dbq_health")
	qrole := dialect.Quote(dialect.Postgres, role)
	exec := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE ROLE " + qrole + " LOGIN")
	t.Cleanup(func() {
		ctx := context.Background()
		for _, sql := range []string{"DROP OWNED BY " + qrole, "DROP ROLE " + qrole} {
			if _, err := pool.Exec(ctx, sql); err != nil {
				t.Errorf("%s: %v", sql, err)
			}
		}
	})
	exec("GRANT USAGE ON SCHEMA " + dialect.Quote(dialect.Postgres, cfg.Schema) + " TO " + qrole)
	pc, err := pgxpool.ParseConfig(dbtest.DSN(dialect.Postgres))
	if err != nil {
		t.Fatal(err)
	}
	pc.ConnConfig.User = role
	pc.MaxConns = 2
	rpool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rpool.Close) // before the role is dropped
	q, err := New(rpool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	pid := holdSnapshot(t, "dbq-health-other-role")
	h := health(t, q)
	if h.FullView {
		t.Error("a role without pg_read_all_stats is told it sees every session in full")
	}
	if x, ok := holderOf(h, pid); !ok || x.User != "postgres" || x.State != "" || !x.Since.IsZero() || x.Age != 0 {
		t.Errorf("a role without pg_read_all_stats sees another role's snapshot as %+v (found %v); want pid and user only", x, ok)
	}
	if r := checkHealth(h, time.Hour)[0]; !strings.Contains(r.Saw, "pg_monitor") {
		t.Errorf("horizon probe without pg_read_all_stats does not say what to grant: %+v", r)
	}
	exec("GRANT pg_read_all_stats TO " + qrole)
	h = health(t, q)
	if !h.FullView {
		t.Error("a role with pg_read_all_stats is told it does not see every session in full")
	}
	if x, ok := holderOf(h, pid); !ok || x.State != "idle in transaction" || x.Since.IsZero() {
		t.Errorf("a role with pg_read_all_stats does not see the held snapshot of session %d: %+v", pid, h.Holders)
	}
}

// TestCheckHealth: the probes' verdicts on reports, without a database.
func TestCheckHealth(t *testing.T) {
	t.Parallel()
	now := time.Now()
	session := func(age time.Duration) queue.HorizonHolder {
		return queue.HorizonHolder{Kind: queue.HolderSession, PID: 7, State: "idle in transaction", Since: now.Add(-age), Age: age, XIDAge: 10}
	}
	slot := func(state string, catalog bool) queue.HorizonHolder {
		return queue.HorizonHolder{Kind: queue.HolderSlot, Name: "r1", State: state, XIDAge: 99, CatalogOnly: catalog}
	}
	for _, tc := range []struct {
		name          string
		h             queue.Health
		horizon, dead bool
	}{
		{"nothing held", queue.Health{}, true, true},
		{"young session", queue.Health{Holders: []queue.HorizonHolder{session(time.Minute)}}, true, true},
		{"old session", queue.Health{Holders: []queue.HorizonHolder{session(6 * time.Minute)}}, false, true},
		{"old prepared", queue.Health{Holders: []queue.HorizonHolder{{Kind: queue.HolderPrepared, Name: "g", Age: time.Hour}}}, false, true},
		{"active slot", queue.Health{Holders: []queue.HorizonHolder{slot("active", false)}}, true, true},
		{"inactive slot", queue.Health{Holders: []queue.HorizonHolder{slot("inactive", false)}}, false, true},
		{"inactive logical slot", queue.Health{Holders: []queue.HorizonHolder{slot("inactive", true)}}, true, true},
		{"dead below the floor", queue.Health{Table: queue.TableHealth{DeadRows: 100_000}}, true, true},
		{"dead above the floor", queue.Health{Table: queue.TableHealth{DeadRows: 100_001}}, true, false},
		{"dead below twice live", queue.Health{Table: queue.TableHealth{DeadRows: 300_000, LiveRows: 150_000}}, true, true},
		{"dead above twice live", queue.Health{Table: queue.TableHealth{DeadRows: 300_001, LiveRows: 150_000}}, true, false},
	} {
		tc.h.FullView = true
		rs := checkHealth(tc.h, DefaultHorizonWarn)
		if len(rs) != 2 || rs[0].Name != "horizon" || rs[1].Name != "dead rows" {
			t.Fatalf("%s: probes %+v", tc.name, rs)
		}
		for i, want := range []bool{tc.horizon, tc.dead} {
			if rs[i].OK != want || (rs[i].Fix != "") == want {
				t.Errorf("%s: %s probe %+v; want ok %v, a fix only when failed", tc.name, rs[i].Name, rs[i], want)
			}
		}
	}
}
