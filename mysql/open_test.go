package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
)

// TestOpenURLForm opens the CLI's mysql:// form and reports the server.
func TestOpenURLForm(t *testing.T) {
	t.Parallel()
	name, _ := newDatabase(t)
	u, err := url.Parse(dbtest.DSN(dialect.MySQL))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	q, err := Open(context.Background(), u.String(), Config{Config: queue.Config{Logger: quiet}})
	if err != nil {
		t.Fatalf("Open(%s): %v", dialect.Redact(u.String()), err)
	}
	defer q.Close()
	d := q.Driver().(*Driver)
	srv := d.Server()
	if srv.Major == 0 || srv.Version == "" || (srv.Flavor != MySQL && srv.Flavor != MariaDB && srv.Flavor != TiDB) {
		t.Fatalf("Server() = %+v", srv)
	}
	t.Logf("server: %s (%s), innodb_autoinc_lock_mode %d", srv, srv.Version, srv.AutoincLockMode)
	if q.Dialect() != "mysql" {
		t.Errorf("Dialect() = %q", q.Dialect())
	}
	if err := Migrate(context.Background(), d.DB(), Config{}); err != nil {
		t.Fatal(err)
	}
	// Every session of Open's pool is READ COMMITTED.
	var iso string
	if err := d.DB().QueryRow("SELECT @@" + srv.isolationVar()).Scan(&iso); err != nil || iso != "READ-COMMITTED" {
		t.Errorf("pool isolation %q, %v", iso, err)
	}
	if _, err := q.Enqueue(context.Background(), queue.NewJob{Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.DB().Ping(); err == nil {
		t.Error("Close left Open's pool open")
	}
}

// TestSchemaConfig keeps the tables in a database named by Config.Schema,
// which Migrate creates, with a prefix of its own.
func TestSchemaConfig(t *testing.T) {
	t.Parallel()
	_, dsn := newDatabase(t)
	schema := dbtest.UniqueName("dbq_my_schema")
	a := admin(t)
	t.Cleanup(func() {
		if _, err := a.Exec("DROP DATABASE IF EXISTS " + dialect.Quote(dialect.MySQL, schema)); err != nil {
			t.Errorf("drop database %s: %v", schema, err)
		}
	})
	cfg := Config{Config: queue.Config{Schema: schema, Prefix: "app_"}}
	q, d := openQueueOn(t, dsn, cfg, true)
	ctx := context.Background()
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "q", Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := d.DB().QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM `%s`.app_jobs", schema)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows in %s.app_jobs: %d, %v", schema, n, err)
	}
	c := newClaimer(t, q)
	jobs, err := c.Claim(ctx, "q", 10)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %d, %v", len(jobs), err)
	}
	if err := c.Complete(ctx, leases(jobs)); err != nil {
		t.Fatal(err)
	}
	if n, err := d.Rescue(ctx); err != nil || n != 0 {
		t.Fatalf("Rescue: %d, %v", n, err)
	}
}

// TestUserDBAnyTimeSettings: New on a *sql.DB whose DSN has parseTime and a
// loc far from UTC, or neither, reads and writes the same instants.
func TestUserDBAnyTimeSettings(t *testing.T) {
	t.Parallel()
	for _, params := range []string{"", "?parseTime=true&loc=Asia%2FKolkata", "?parseTime=true&loc=America%2FNew_York&interpolateParams=true"} {
		t.Run(params, func(t *testing.T) {
			t.Parallel()
			_, dsn := newDatabase(t)
			db, err := sql.Open("mysql", dsn+params)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := Migrate(context.Background(), db, Config{}); err != nil {
				t.Fatal(err)
			}
			q, err := New(db, Config{Config: queue.Config{Logger: quiet, Lease: time.Hour}})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			ctx := context.Background()
			runAt := time.Now().Add(-90 * time.Minute).Truncate(time.Microsecond)
			if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "q", RunAt: runAt}); err != nil {
				t.Fatal(err)
			}
			if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "q", RunAt: time.Now().Add(30 * time.Minute)}); err != nil {
				t.Fatal(err)
			}
			c, err := q.NewClaimer(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(ctx)
			jobs, err := c.Claim(ctx, "q", 10)
			if err != nil || len(jobs) != 1 {
				t.Fatalf("claim: %d jobs, %v (the job 30 minutes ahead must wait)", len(jobs), err)
			}
			j := jobs[0]
			if !j.RunAt.Equal(runAt) {
				t.Errorf("run_at %v, enqueued %v", j.RunAt, runAt)
			}
			if d := time.Since(j.CreatedAt); d < -time.Minute || d > time.Minute {
				t.Errorf("created_at %v is %v from now", j.CreatedAt, d)
			}
			if d := time.Until(j.ClaimedUntil); d < 59*time.Minute || d > 61*time.Minute {
				t.Errorf("lease ends in %v, want an hour", d)
			}
			st, err := q.Stats(ctx)
			if err != nil || len(st) != 1 || st[0].Scheduled != 1 || st[0].Held != 1 {
				t.Fatalf("stats %+v %v", st, err)
			}
		})
	}
}

// TestStatsAge reports how long the oldest ready job has waited.
func TestStatsAge(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t, Config{}, true)
	ctx := context.Background()
	if _, err := q.Enqueue(ctx,
		queue.NewJob{Queue: "a", RunAt: time.Now().Add(-time.Minute)},
		queue.NewJob{Queue: "a"},
		queue.NewJob{Queue: "b", Delay: time.Hour},
	); err != nil {
		t.Fatal(err)
	}
	st, err := q.Stats(ctx)
	if err != nil || len(st) != 2 {
		t.Fatal(st, err)
	}
	if st[0].Queue != "a" || st[0].Ready != 2 || st[0].OldestReadyAge < 55 || st[0].OldestReadyAge > 120 {
		t.Errorf("a: %+v", st[0])
	}
	if st[1].Queue != "b" || st[1].Scheduled != 1 || st[1].OldestReadyAge != 0 {
		t.Errorf("b: %+v", st[1])
	}
}
