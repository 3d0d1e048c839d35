package sqlite

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

// A dedupe collision inside the caller's transaction returns the existing
// job and leaves the transaction usable: its other work still commits.
func TestEnqueueUniqueInCallersTx(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{})
	ctx := ctxT(t)
	first := enqueue(t, q, queue.NewJob{Queue: "u", DedupeKey: "k"})[0]

	tx, err := driverOf(t, q).DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	id, existed, err := q.EnqueueUnique(ctx, tx, queue.NewJob{Queue: "u", DedupeKey: "k"})
	if err != nil || !existed || id != first {
		t.Fatalf("EnqueueUnique(tx) = %d, %v, %v; want %d, true, nil", id, existed, err, first)
	}
	fresh, existed, err := q.EnqueueUnique(ctx, tx, queue.NewJob{Queue: "u", DedupeKey: "other"})
	if err != nil || existed {
		t.Fatalf("EnqueueUnique(tx, new key) = %d, %v, %v; want a new job", fresh, existed, err)
	}
	if _, err := q.EnqueueTx(ctx, tx, queue.NewJob{Queue: "u"}); err != nil {
		t.Fatalf("EnqueueTx after the collision: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	wantCounts(t, q, "u", 3, 0, 0, 0)
}

// RetryDead revives more than one statement's batch.
func TestRetryDeadBatches(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{})
	ctx := ctxT(t)
	const n = retryDeadBatch + 7
	jobs := make([]queue.NewJob, n)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: "d"}
	}
	enqueue(t, q, jobs...)
	d := driverOf(t, q)
	// Kill them all without claiming: what a long outage leaves behind.
	if _, err := d.DB().ExecContext(ctx,
		"UPDATE "+d.names.Qualified(dialect.SQLite, d.names.Jobs())+" SET state = 'dead'"); err != nil {
		t.Fatal(err)
	}
	got, err := q.RetryDead(ctx, "d")
	if err != nil || len(got) != n {
		t.Fatalf("RetryDead revived %d, %v; want %d", len(got), err, n)
	}
	wantCounts(t, q, "d", n, 0, 0, 0)
}

// Every batch size splits into INSERTs that are kept prepared and carry
// exactly the batch.
func TestEnqueueSplit(t *testing.T) {
	s, err := loadStatements(dialect.Names{})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= enqueueChunk; n++ {
		sum := 0
		for _, size := range enqueueSplit(n) {
			if s.enqueue(size).adhoc {
				t.Fatalf("enqueueSplit(%d) has size %d, which is not kept prepared", n, size)
			}
			sum += size
		}
		if sum != n {
			t.Fatalf("enqueueSplit(%d) carries %d jobs", n, sum)
		}
	}
}

// The admin statements name both tables with the configured prefix.
func TestAdminStatementsRenderTables(t *testing.T) {
	s, err := loadStatements(dialect.Names{Prefix: "pfx_"})
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]*stmt{"claim": s.claim, "stats": s.stats, "set_paused": s.setPaused, "paused": s.paused} {
		if strings.Contains(st.text, "{{") || !strings.Contains(st.text, `"pfx_queues"`) {
			t.Errorf("%s: queues table not spliced:\n%s", name, st.text)
		}
	}
	for name, st := range map[string]*stmt{"jobs": s.jobs, "cancel": s.cancel, "retry_dead": s.retryDead,
		"find_unique": s.findUnique, "enqueue_unique": s.enqueueUnique} {
		if strings.Contains(st.text, "{{") || !strings.Contains(st.text, `"pfx_jobs"`) {
			t.Errorf("%s: jobs table not spliced:\n%s", name, st.text)
		}
	}
}

// The claim's subquery stays a range scan of the partial claim index with
// no sort, with the pause probe and the un-hinted LIMIT in place.
func TestClaimPlanUsesClaimIndex(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{})
	d := driverOf(t, q)
	rows, err := d.DB().QueryContext(ctxT(t), "EXPLAIN QUERY PLAN "+d.stmts.claim.text, int64(1), int64(1), "q", 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	if !strings.Contains(text, "INDEX dbq_jobs_claim (queue=?)") || strings.Contains(text, "TEMP B-TREE") {
		t.Fatalf("claim plan does not range-scan the claim index:\n%s", text)
	}
}

// Listing a queue's dead jobs is a range of the partial index jobs_dead,
// not a walk over the queue's ready jobs, and pages in id order.
func TestJobsDeadUsesIndex(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{})
	ctx := ctxT(t)
	jobs := make([]queue.NewJob, 50)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: "d"}
	}
	ids := enqueue(t, q, jobs...)
	d := driverOf(t, q)
	table := d.names.Qualified(dialect.SQLite, d.names.Jobs())
	if _, err := d.DB().ExecContext(ctx, "UPDATE "+table+" SET state = 'dead' WHERE id % 10 = 0"); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"", "email"} {
		var plan strings.Builder
		rows, err := d.DB().QueryContext(ctx, "EXPLAIN QUERY PLAN "+d.stmts.jobsDead.text, "d", 0, 10, kind)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(detail + "\n")
		}
		rows.Close()
		if !strings.Contains(plan.String(), "jobs_dead") {
			t.Fatalf("plan of jobs_dead.sql (kind %q) does not use the jobs_dead index:\n%s", kind, plan.String())
		}
	}
	var dead []int64
	for _, id := range ids {
		if id%10 == 0 {
			dead = append(dead, id)
		}
	}
	page1, err := q.Jobs(ctx, queue.JobFilter{Queue: "d", State: queue.StateDead, Limit: 3})
	if err != nil || len(page1) != 3 {
		t.Fatalf("first page: %d jobs, %v", len(page1), err)
	}
	page2, err := q.Jobs(ctx, queue.JobFilter{Queue: "d", State: queue.StateDead, AfterID: page1[2].ID})
	if err != nil {
		t.Fatal(err)
	}
	got := queue.IDs(append(page1, page2...))
	if len(got) != len(dead) {
		t.Fatalf("listed dead %v, want %v", got, dead)
	}
	for i := range got {
		if got[i] != dead[i] {
			t.Fatalf("listed dead %v, want %v", got, dead)
		}
	}
}

// Kind travels with every path a job takes here: both Jobs variants filter
// on it, StatsByKind counts each state per kind with the states of Stats,
// and a plain-SQL INSERT that names no kind stores the empty kind.
func TestKindsFilterAndStats(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{})
	ctx := ctxT(t)
	ids := enqueue(t, q,
		queue.NewJob{Queue: "k", Kind: "email"},
		queue.NewJob{Queue: "k", Kind: "email", Delay: time.Hour},
		queue.NewJob{Queue: "k", Kind: "resize"},
		queue.NewJob{Queue: "k", Kind: "email"},
		queue.NewJob{Queue: "a"})
	d := driverOf(t, q)
	table := d.names.Qualified(dialect.SQLite, d.names.Jobs())
	if _, err := d.DB().ExecContext(ctx, "INSERT INTO "+table+" (queue, payload) VALUES ('a', x'')"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DB().ExecContext(ctx, "UPDATE "+table+" SET state = 'dead' WHERE id IN (?, ?)", ids[2], ids[3]); err != nil {
		t.Fatal(err)
	}
	held := claim(t, newClaimer(t, q), "k", 1)
	if len(held) != 1 || held[0].ID != ids[0] || held[0].Kind != "email" {
		t.Fatalf("claimed %+v, want job %d of kind email", held, ids[0])
	}
	for _, c := range []struct {
		f    queue.JobFilter
		want []int64
	}{
		{queue.JobFilter{Kind: "email"}, []int64{ids[0], ids[1], ids[3]}},
		{queue.JobFilter{Queue: "k", State: queue.StateDead, Kind: "email"}, []int64{ids[3]}},
		{queue.JobFilter{Queue: "k", State: queue.StateDead, Kind: "resize"}, []int64{ids[2]}},
		{queue.JobFilter{Queue: "a", Kind: "email"}, nil},
	} {
		got, err := q.Jobs(ctx, c.f)
		if err != nil || !slices.Equal(queue.IDs(got), c.want) {
			t.Errorf("Jobs(%+v) = %v, %v; want %v", c.f, queue.IDs(got), err, c.want)
		}
		for _, j := range got {
			if j.Kind != c.f.Kind {
				t.Errorf("Jobs(%+v): job %d has kind %q", c.f, j.ID, j.Kind)
			}
		}
	}
	all, err := q.Jobs(ctx, queue.JobFilter{Queue: "a"})
	if err != nil || len(all) != 2 || all[0].Kind != "" || all[1].Kind != "" {
		t.Fatalf("Jobs(queue a) = %+v, %v; want 2 jobs without a kind", all, err)
	}
	got, err := q.StatsByKind(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []queue.KindStats{
		{Queue: "a", Kind: "", Ready: 2},
		{Queue: "k", Kind: "email", Scheduled: 1, Held: 1, Dead: 1},
		{Queue: "k", Kind: "resize", Dead: 1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("StatsByKind = %+v, want %+v", got, want)
	}
}

// CountQueues counts a claimed job whose lease has expired as ready, as
// Stats does, and the rest of the claimed jobs as held, each capped.
func TestCountQueuesExpiredLeaseIsReady(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{})
	ctx := ctxT(t)
	enqueue(t, q, queue.NewJob{Queue: "e"}, queue.NewJob{Queue: "e"}, queue.NewJob{Queue: "e"}, queue.NewJob{Queue: "e"})
	jobs, err := newClaimer(t, q).Claim(ctx, "e", 3)
	if err != nil || len(jobs) != 3 {
		t.Fatalf("Claim: %v, %v", jobs, err)
	}
	d := driverOf(t, q)
	if _, err := d.DB().ExecContext(ctx, "UPDATE "+d.names.Qualified(dialect.SQLite, d.names.Jobs())+
		" SET claimed_until = 0 WHERE id = ?", jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, q, "e", 2, 0, 2, 0)
	for _, limit := range []int64{10, 2, 1} {
		got, err := q.CountQueues(ctx, limit)
		if err != nil || len(got) != 1 {
			t.Fatalf("CountQueues(%d) = %+v, %v", limit, got, err)
		}
		if s := got[0]; s.Ready != min(2, limit) || s.Held != min(2, limit) || s.Scheduled != 0 || s.Dead != 0 {
			t.Errorf("CountQueues(%d) = %+v, want 2 ready and 2 held, each at most %d", limit, s, limit)
		}
	}
}

// count_queues.sql counts ready and scheduled jobs as a seek per priority
// into its due or its future range of the claim index, not a read of the
// queue's whole range filtered on run_at.
func TestCountQueuesPlanSeeksPerPriority(t *testing.T) {
	t.Parallel()
	q := newQ(t, queue.Config{})
	d := driverOf(t, q)
	rows, err := d.DB().QueryContext(ctxT(t), "EXPLAIN QUERY PLAN "+d.stmts.countQueues.text, int64(1000))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	for _, want := range []string{"INDEX dbq_jobs_claim (queue=? AND priority=? AND run_at<?)",
		"INDEX dbq_jobs_claim (queue=? AND priority=? AND run_at>?)"} {
		if !strings.Contains(text, want) {
			t.Errorf("count_queues plan has no %s:\n%s", want, text)
		}
	}
}
