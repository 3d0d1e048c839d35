package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/queue"
)

// dedupeIndexVersion is the migration that rebuilt the dedupe index over
// (dedupe_key, dedupe_queue).
const dedupeIndexVersion = 7

// indexColumns returns the columns of index name of table, in key order,
// and whether it is unique, from the server's catalog.
func indexColumns(t testing.TB, db *sql.DB, schema, table, name string) (string, bool) {
	t.Helper()
	rows, err := db.Query(`SELECT COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND INDEX_NAME = ? ORDER BY SEQ_IN_INDEX`, schema, table, name)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []string
	unique := true
	for rows.Next() {
		var c string
		var nonUnique int
		if err := rows.Scan(&c, &nonUnique); err != nil {
			t.Fatal(err)
		}
		cols, unique = append(cols, c), unique && nonUnique == 0
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(cols, ", "), unique && len(cols) > 0
}

// planReads reports whether the server's plan for query reads index, and
// returns the plan. MySQL and MariaDB give it as JSON (EXPLAIN FORMAT=JSON,
// "key": "<index>"); TiDB has no such format ("explain format 'json' is not
// supported now") and gives its operators as rows (FORMAT='brief'), whose
// access object names an index read as "index:<index>(<columns>)".
func planReads(ctx context.Context, t testing.TB, db *sql.DB, index, query string, args ...any) (bool, string) {
	t.Helper()
	if hasInnoDBLocks(t) {
		var plan string
		if err := db.QueryRowContext(ctx, "EXPLAIN FORMAT=JSON "+query, args...).Scan(&plan); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(plan, `"key": "`+index+`"`), plan
	}
	rows, err := db.QueryContext(ctx, "EXPLAIN FORMAT='brief' "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan strings.Builder
	reads := false
	for rows.Next() {
		var id, est, task, object, info string
		if err := rows.Scan(&id, &est, &task, &object, &info); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&plan, "%s\t%s\t%s\t%s\n", id, task, object, info)
		reads = reads || strings.Contains(object, "index:"+index+"(")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return reads, plan.String()
}

// TestDedupeIndexMigration: migration 00007 on a jobs table that holds
// jobs (with and without dedupe keys, one key in two queues) replaces
// UNIQUE (queue, dedupe_key) by UNIQUE (dedupe_key, dedupe_queue), keeps
// every job, and enforces what the old index did; the move import's
// look-up by queue and key still reads that index; Down restores the old
// index and Up applies again.
func TestDedupeIndexMigration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := admin(t)
	schema, _ := newDatabase(t)
	names := dialect.Names{Schema: schema}.WithDefaults()
	p, err := migrations.NewProvider(ctx, dialect.MySQL, db, names)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, dedupeIndexVersion-1); err != nil {
		t.Fatalf("up to %d: %v", dedupeIndexVersion-1, err)
	}
	table := names.Prefix + "jobs"
	index := names.Prefix + "jobs_dedupe"
	jobs := names.Qualified(dialect.MySQL, table)
	if cols, unique := indexColumns(t, db, schema, table, index); cols != "queue, dedupe_key" || !unique {
		t.Fatalf("before %d: %s is (%s), unique %v; want UNIQUE (queue, dedupe_key)", dedupeIndexVersion, index, cols, unique)
	}
	insert := "INSERT INTO " + jobs + " (queue, payload, run_at, created_at, dedupe_key) VALUES (?, '', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), ?)"
	for _, r := range [][2]any{{"a", "k1"}, {"a", "k2"}, {"b", "k1"}, {"a", nil}, {"a", nil}, {"b", nil}} {
		if _, err := db.ExecContext(ctx, insert, r[0], r[1]); err != nil {
			t.Fatalf("insert %v: %v", r, err)
		}
	}
	// Thousands of jobs without a key, so that the planner reads an index
	// for a look-up by key rather than the whole table.
	for range 10 {
		if _, err := db.ExecContext(ctx, "INSERT INTO "+jobs+" (queue, payload, run_at, created_at) SELECT queue, payload, run_at, created_at FROM "+jobs+" WHERE dedupe_key IS NULL"); err != nil {
			t.Fatal(err)
		}
	}
	const keyless = 3 << 10

	if _, err := p.UpTo(ctx, dedupeIndexVersion); err != nil {
		t.Fatalf("up to %d: %v", dedupeIndexVersion, err)
	}
	if cols, unique := indexColumns(t, db, schema, table, index); cols != "dedupe_key, dedupe_queue" || !unique {
		t.Errorf("after %d: %s is (%s), unique %v; want UNIQUE (dedupe_key, dedupe_queue)", dedupeIndexVersion, index, cols, unique)
	}
	if cols, _ := indexColumns(t, db, schema, table, index+"_new"); cols != "" {
		t.Errorf("after %d: the build index %s_new is left, on (%s)", dedupeIndexVersion, index, cols)
	}
	// dedupe_queue is the queue of a job with a key and NULL for one without.
	var n, withQueue, nulls int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(dedupe_queue), SUM(dedupe_queue IS NULL AND dedupe_key IS NULL) FROM "+jobs+
		" WHERE dedupe_queue <=> IF(dedupe_key IS NULL, NULL, queue)").Scan(&n, &withQueue, &nulls); err != nil {
		t.Fatal(err)
	}
	if n != 3+keyless || withQueue != 3 || nulls != keyless {
		t.Errorf("after %d: %d of %d jobs with the right dedupe_queue, %d with one, %d without key or queue; want all, 3, %d",
			dedupeIndexVersion, n, 3+keyless, withQueue, nulls, keyless)
	}
	// The same rules: a key once per queue, in any number of queues, and
	// any number of jobs without a key.
	if _, err := db.ExecContext(ctx, insert, "a", "k1"); !isDuplicate(err) {
		t.Errorf("a second job with key k1 in queue a: err %v, want a duplicate-key error", err)
	}
	for _, r := range [][2]any{{"c", "k1"}, {"a", nil}, {"c", nil}} {
		if _, err := db.ExecContext(ctx, insert, r[0], r[1]); err != nil {
			t.Errorf("insert %v: %v", r, err)
		}
	}
	// The move import's look-up (stored.sql) reads the dedupe index.
	if _, err := db.ExecContext(ctx, "ANALYZE TABLE "+jobs); err != nil {
		t.Fatal(err)
	}
	if reads, plan := planReads(ctx, t, db, index, "SELECT id FROM "+jobs+" WHERE queue = ? AND dedupe_key IN (?, ?)", "a", "k1", "k2"); !reads {
		t.Errorf("the look-up by queue and dedupe key does not read %s:\n%s", index, plan)
	}

	if _, err := p.DownTo(ctx, dedupeIndexVersion-1); err != nil {
		t.Fatalf("down to %d: %v", dedupeIndexVersion-1, err)
	}
	if cols, unique := indexColumns(t, db, schema, table, index); cols != "queue, dedupe_key" || !unique {
		t.Errorf("down: %s is (%s), unique %v; want UNIQUE (queue, dedupe_key)", index, cols, unique)
	}
	var cols int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND COLUMN_NAME = 'dedupe_queue'",
		schema, table).Scan(&cols); err != nil {
		t.Fatal(err)
	}
	if cols != 0 {
		t.Error("down: dedupe_queue is still there")
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
	if cols, unique := indexColumns(t, db, schema, table, index); cols != "dedupe_key, dedupe_queue" || !unique {
		t.Errorf("up again: %s is (%s), unique %v", index, cols, unique)
	}
}

// TestGaleraDedupeAcrossNodes: EnqueueUnique of one key on two nodes at
// once, many times over. Certification must see the two inserts collide
// on the dedupe index (over a virtual column): one stores the job, the
// other finds it, every node ends up with one job per key, and no node
// leaves the cluster (an insert certification missed would fail to apply
// on the other nodes with a duplicate key, and they would drop out).
func TestGaleraDedupeAcrossNodes(t *testing.T) {
	ns := galeraNodes(t)
	keys := 200
	_, dsns := galeraDatabase(t, ns, 0)
	qs := make([]*queue.Queue, 2)
	ds := make([]*Driver, 2)
	for i := range qs {
		qs[i], ds[i] = openQueueOn(t, dsns[i], Config{}, i == 0)
	}
	jobs := ds[0].stmts.jobsTable
	for _, d := range ds[1:] {
		waitVisible(t, d.db, "SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND INDEX_NAME = 'dbq_jobs_dedupe' AND COLUMN_NAME = 'dedupe_queue'")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stored := 0
	for k := range keys {
		job := queue.NewJob{Queue: "dd", Payload: []byte("p"), DedupeKey: fmt.Sprintf("key%d", k)}
		var (
			wg      sync.WaitGroup
			ids     [2]int64
			existed [2]bool
			errs    [2]error
			start   = make(chan struct{})
		)
		for i := range qs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ids[i], existed[i], errs[i] = ds[i].EnqueueUnique(ctx, nil, job)
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("key %s on node %d: %v", job.DedupeKey, i+1, err)
			}
		}
		if ids[0] != ids[1] || existed[0] == existed[1] {
			t.Errorf("key %s: node 1 gave id %d (existed %v), node 2 id %d (existed %v); want one id, stored once",
				job.DedupeKey, ids[0], existed[0], ids[1], existed[1])
		}
		if !existed[0] || !existed[1] {
			stored++
		}
	}
	if stored != keys {
		t.Errorf("%d keys stored, want %d", stored, keys)
	}
	for i, n := range ns {
		var size, state string
		if err := n.db.QueryRow("SELECT (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'wsrep_cluster_size'), "+
			"(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'wsrep_local_state_comment')").Scan(&size, &state); err != nil {
			t.Fatalf("node %d: %v", i+1, err)
		}
		if size != "3" || state != "Synced" {
			t.Errorf("node %d: cluster size %s, %s; want 3, Synced", i+1, size, state)
		}
	}
	for i, dsn := range dsns {
		_, d := openQueueOn(t, dsn, Config{}, false)
		var rows, distinct int
		for deadline := time.Now().Add(10 * time.Second); ; {
			if err := d.db.QueryRow("SELECT COUNT(*), COUNT(DISTINCT dedupe_key) FROM "+jobs).Scan(&rows, &distinct); err != nil {
				t.Fatal(err)
			}
			if rows >= keys || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if rows != keys || distinct != keys {
			t.Errorf("node %d: %d jobs for %d keys; want %d, one per key", i+1, rows, distinct, keys)
		}
	}
}
