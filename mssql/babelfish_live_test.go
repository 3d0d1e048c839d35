package mssql

// Live tests of what differs on Babelfish for PostgreSQL, and of what
// running there found: they run on SQL Server and on Babelfish alike.

import (
	"testing"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
)

// Tables without a schema (`dbq migrate up` with the defaults) migrate and
// take jobs: the sequence's NEXT VALUE FOR is a bare name there, which
// Babelfish resolves (it looked up NEXT VALUE FOR [dbq_jobs_id_seq] with
// the brackets in the name and the first migration failed).
func TestLiveMigrateWithoutSchema(t *testing.T) {
	db := liveDB(t)
	ctx := liveCtx(t)
	cfg := Config{}
	cfg.Prefix = dbtest.UniqueName("nos") + "_"
	n := cfg.Names()
	t.Cleanup(func() {
		for _, table := range []string{"jobs_dedupe", "jobs_inflight", "jobs", "queues", "schedules", "activity", "processes", "schema_version"} {
			if _, err := db.Exec("DROP TABLE IF EXISTS " + dialect.Quote(dialect.MSSQL, n.Prefix+table)); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		if _, err := db.Exec("DROP SEQUENCE IF EXISTS " + dialect.Quote(dialect.MSSQL, n.Prefix+"jobs_id_seq")); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	if err := Migrate(ctx, db, cfg); err != nil {
		t.Fatalf("Migrate without a schema: %v", err)
	}
	q, err := New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	ids, err := q.Enqueue(ctx, queue.NewJob{Queue: "noschema", Payload: []byte("a")}, queue.NewJob{Queue: "noschema", Payload: []byte("b")})
	if err != nil || len(ids) != 2 || ids[0] >= ids[1] {
		t.Fatalf("Enqueue: %v, %v", ids, err)
	}
	// A row inserted without an id takes one from the column's default.
	if _, err := db.ExecContext(ctx, "INSERT INTO "+dialect.Quote(dialect.MSSQL, n.Prefix+"jobs")+
		" (queue, payload) VALUES ('noschema', 0x63)"); err != nil {
		t.Fatalf("INSERT through the id default: %v", err)
	}
	c, err := q.NewClaimer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Claim(ctx, "noschema", 10)
	if err != nil || len(jobs) != 3 {
		t.Fatalf("Claim: %d jobs, %v; want 3", len(jobs), err)
	}
	if err := c.Complete(ctx, leasesOf(jobs)); err != nil {
		t.Fatal(err)
	}
}
