package postgres

import (
	"testing"

	"github.com/dbqueue/dbq/queue"
)

// TestExportLocksOnlyItsBatch: an export batch holds advisory locks on its
// own jobs and no others, whatever plan the (analyzed) table gets, so
// advisory claimers go on taking the rest while it is open.
func TestExportLocksOnlyItsBatch(t *testing.T) {
	q := newQueue(t, Config{}, true)
	d := driverOf(t, q)
	ctx := testCtx(t)
	jobs := make([]queue.NewJob, 10_000)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: "m"}
	}
	if _, err := q.Enqueue(ctx, jobs...); err != nil {
		t.Fatal(err)
	}
	if _, err := d.pool.Exec(ctx, "ANALYZE "+d.stmts.table); err != nil {
		t.Fatal(err)
	}
	b, err := d.Export(ctx, queue.ExportFilter{Ready: true, Scheduled: true, Dead: true, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Rollback() }()
	if got := len(b.Jobs()); got != 500 {
		t.Fatalf("batch holds %d jobs, want 500", got)
	}
	var locks int
	err = d.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 2 AND classid = $1::regclass::oid`, d.stmts.table).Scan(&locks)
	if err != nil {
		t.Fatal(err)
	}
	if locks != 500 {
		t.Fatalf("%d advisory locks on the table while a batch of 500 is open, want 500", locks)
	}
	c := newClaimer(t, q)
	got, err := c.Claim(ctx, "m", 100)
	if err != nil || len(got) != 100 {
		t.Fatalf("an advisory claim beside the open batch took %d jobs, %v; want 100", len(got), err)
	}
	inBatch := map[int64]bool{}
	for _, j := range b.Jobs() {
		inBatch[j.ID] = true
	}
	for _, j := range got {
		if inBatch[j.ID] {
			t.Fatalf("the claim took job %d of the open export batch", j.ID)
		}
	}
}
