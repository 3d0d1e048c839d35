package mssql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/queue"
	"github.com/sqlc-dev/teesql/ast"
)

// renderStatements renders the statements of sql/ for n.
func renderStatements(n dialect.Names) (*statements, error) {
	return loadStatements(sqlPattern, n)
}

// exampleRows renders statement name with n VALUES rows, as its caller
// does.
func exampleRows(stmts *statements, name string, n int) string {
	text, err := stmts.rows(name, n)
	if err != nil {
		panic(err)
	}
	return text
}

// Every statement file renders, parses, and passes its spec.
func TestStatementsMatchTheirSpecs(t *testing.T) {
	stmts, err := renderStatements(testNames)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := stmts.names(), slices.Sorted(maps.Keys(specs)); !slices.Equal(got, want) {
		t.Fatalf("statement files %v, specs %v", got, want)
	}
	for _, name := range stmts.names() {
		text := exampleRows(stmts, name, 1)
		t.Run(name, func(t *testing.T) {
			if strings.Contains(text, "--") || strings.Contains(text, "dbq_jobs") {
				t.Errorf("comment or default prefix left in:\n%s", text)
			}
			for _, n := range []int{1, 3} {
				if err := checkSQL(name, exampleRows(stmts, name, n), nil); err != nil {
					t.Errorf("%d rows: %v\n%s", n, err, exampleRows(stmts, name, n))
				}
			}
		})
	}
}

// The statements name the tables of their own Names, quoted and
// qualified; no other name or marker gets through.
func TestStatementsUseConfiguredNames(t *testing.T) {
	for _, n := range []dialect.Names{{}, {Prefix: "q1_"}, {Schema: "jobs_schema", Prefix: "x_"}} {
		stmts, err := renderStatements(n)
		if err != nil {
			t.Fatal(err)
		}
		n = n.WithDefaults()
		// Every table name starts so: [schema].[prefix or [prefix.
		want := strings.TrimSuffix(n.Qualified(dialect.MSSQL, n.Prefix), "]")
		for _, name := range stmts.names() {
			text := exampleRows(stmts, name, 2)
			if strings.Contains(text, "{{") {
				t.Errorf("%s: marker left: %s", name, text)
			}
			if name != sqlSavepoint && name != sqlRollbackSavepoint && !strings.Contains(text, want) {
				t.Errorf("%s with %+v does not name %s", name, n, want)
			}
		}
	}
	for _, bad := range []dialect.Names{{Prefix: "x]; DROP TABLE t; --"}, {Schema: "a b"}} {
		if _, err := renderStatements(bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// The checker is not a rubber stamp: each statement below parses (teesql is
// lenient) yet lacks something the dialect depends on, and the checker
// says so.
func TestCheckerRejects(t *testing.T) {
	stmts, err := renderStatements(testNames)
	if err != nil {
		t.Fatal(err)
	}
	base := func(name string) string { return exampleRows(stmts, name, 2) }
	// edit returns statement name with old replaced by new, once.
	edit := func(name, old, new string) string {
		t.Helper()
		if !strings.Contains(base(name), old) {
			t.Fatalf("%s has no %q; fix the test", name, old)
		}
		return strings.Replace(base(name), old, new, 1)
	}
	inner := "WITH (READPAST, READCOMMITTEDLOCK)"
	outer := "WITH (NOWAIT, ROWLOCK, FORCESEEK)"
	// The first OUTPUT, with its INTO clause.
	into := regexp.MustCompile(`(?s)OUTPUT deleted\.id.*?INTO \[s1\]\.\[pfx_jobs_inflight\] \(.*?claimed_until\)\s*`)
	if !into.MatchString(base(sqlClaim)) {
		t.Fatal("the claim's OUTPUT INTO clause changed; fix the test")
	}
	for _, tc := range []struct{ name, stmt, text string }{
		{"inner read without READCOMMITTEDLOCK", sqlClaim, edit(sqlClaim, inner, "WITH (READPAST)")},
		{"inner read without hints", sqlClaim, edit(sqlClaim, " "+inner, "")},
		{"DELETE without NOWAIT", sqlClaim, edit(sqlClaim, outer, "WITH (ROWLOCK, FORCESEEK)")},
		{"DELETE free to scan", sqlClaim, edit(sqlClaim, outer, "WITH (NOWAIT, ROWLOCK)")},
		{"the seed's form, hints on the target, no FORCESEEK", sqlClaim, strings.NewReplacer(
			"DELETE TOP (@n) j", "DELETE TOP (@n) FROM [s1].[pfx_jobs] WITH (NOWAIT, ROWLOCK)",
			"FROM [s1].[pfx_jobs] AS j WITH (NOWAIT, ROWLOCK, FORCESEEK)\n", "",
			"j.", "").Replace(base(sqlClaim))},
		{"complete free to scan", sqlComplete, edit(sqlComplete, "AS f WITH (ROWLOCK, FORCESEEK)", "AS f WITH (ROWLOCK)")},
		{"misspelled READCOMMITTEDLOCK, which the parser drops", sqlClaim, edit(sqlClaim, "READCOMMITTEDLOCK", "READCOMMITEDLOCK")},
		{"misspelled FORCESEEK, which the parser drops", sqlComplete, edit(sqlComplete, "AS f WITH (ROWLOCK, FORCESEEK)", "AS f WITH (ROWLOCK, FORCESEK)")},
		{"hints on the wrong references", sqlClaim, strings.NewReplacer(inner, outer, outer, inner).Replace(base(sqlClaim))},
		{"UPDLOCK added to the inner read", sqlClaim, edit(sqlClaim, inner, "WITH (READPAST, READCOMMITTEDLOCK, UPDLOCK)")},
		{"TOP without parentheses", sqlClaim, edit(sqlClaim, "DELETE TOP (@n)", "DELETE TOP 5")},
		{"TOP PERCENT", sqlClaim, edit(sqlClaim, "DELETE TOP (@n)", "DELETE TOP (@n) PERCENT")},
		{"no OUTPUT INTO: the seed's crash-unsafe DELETE", sqlClaim, into.ReplaceAllString(base(sqlClaim), "")},
		{"OUTPUT INTO with two values swapped", sqlClaim, edit(sqlClaim, "deleted.priority, deleted.run_at", "deleted.run_at, deleted.priority")},
		{"no random pick", sqlClaim, edit(sqlClaim, "ORDER BY CHECKSUM(NEWID())", "")},
		{"window without ORDER BY", sqlClaim, edit(sqlClaim, "ORDER BY priority, run_at, id", "")},
		{"outer WHERE without the state check", sqlClaim, edit(sqlClaim, "AND j.state = 'ready' AND j.run_at <= SYSUTCDATETIME();", ";")},
		{"unqualified table", sqlClaim, edit(sqlClaim, "[s1].[pfx_jobs] AS j", "[pfx_jobs] AS j")},
		{"UpdLock claim without READPAST", sqlClaimUpdLock, edit(sqlClaimUpdLock, "UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK", "UPDLOCK, ROWLOCK, READCOMMITTEDLOCK")},
		{"complete without the token match", sqlComplete, edit(sqlComplete, " AND f.claim_token = l.token", "")},
		{"complete outside a transaction", sqlComplete, edit(sqlComplete, "BEGIN TRANSACTION;", "")},
		{"retry that never makes a job dead on request", sqlRetry, edit(sqlRetry, "l.dead = 1 OR ", "")},
		{"release that spends an attempt", sqlRelease, edit(sqlRelease, "deleted.attempt, deleted.max_attempts, 'ready'", "deleted.attempt + 1, deleted.max_attempts, 'ready'")},
		{"rescue of every lease", sqlRescue, edit(sqlRescue, "WHERE claimed_until < SYSUTCDATETIME()", "")},
		{"VALUES row too short", sqlExtend, edit(sqlExtend, "(@i1, @t1)", "(@i1)")},
		{"enqueue ids not in input order", sqlEnqueue, edit(sqlEnqueue, "OVER (ORDER BY v.ord)", "OVER (ORDER BY v.queue)")},
		{"enqueue that drops kinds", sqlEnqueue, edit(sqlEnqueue, "v.queue, v.kind, v.payload", "v.queue, N'', v.payload")},
		{"enqueue that names no kind", sqlEnqueue, strings.NewReplacer("(id, queue, kind, payload", "(id, queue, payload",
			"v.queue, v.kind, v.payload", "v.queue, v.payload").Replace(base(sqlEnqueue))},
		// Every move between jobs and jobs_inflight carries kind.
		{"claim that leaves kind behind", sqlClaim, edit(sqlClaim, "(id, queue, kind, payload", "(id, queue, payload")},
		{"claim that returns no kind", sqlClaim, strings.Replace(base(sqlClaim), "deleted.queue, deleted.kind,", "deleted.queue,", 2)},
		{"UpdLock claim whose CTE has no kind", sqlClaimUpdLock, edit(sqlClaimUpdLock, "id, queue, kind, payload", "id, queue, payload")},
		{"release that loses kind", sqlRelease, edit(sqlRelease, "deleted.queue, deleted.kind,", "deleted.queue, N'',")},
		{"retry that loses kind", sqlRetry, edit(sqlRetry, "(id, queue, kind, payload", "(id, queue, payload")},
		{"rescue that loses kind", sqlRescue, edit(sqlRescue, "deleted.queue, deleted.kind,", "deleted.queue, deleted.queue,")},
		{"abandon that loses kind", sqlAbandon, edit(sqlAbandon, "(id, queue, kind, payload", "(id, queue, payload")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseBatch(tc.text); err != nil {
				t.Fatalf("does not even parse (%v); the test wants a statement only the tree check rejects", err)
			}
			err := checkSQL(tc.stmt, tc.text, nil)
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.text)
			}
			t.Logf("rejected: %v", err)
		})
	}
	// Parameters: one the statement uses but no argument gives, and one
	// given that it does not use.
	claim := base(sqlClaim)
	args := map[string]any{"n": 1, "window": 1, "queue": "q", "token": int64(1), "lease_s": 1, "lease_ms": 0}
	if err := checkSQL(sqlClaim, claim, args); err != nil {
		t.Fatalf("the claim with its arguments: %v", err)
	}
	for _, change := range []func(map[string]any){
		func(m map[string]any) { delete(m, "window") },
		func(m map[string]any) { m["windw"] = 1 },
	} {
		m := maps.Clone(args)
		change(m)
		if err := checkSQL(sqlClaim, claim, m); err == nil {
			t.Errorf("claim with arguments %v accepted", slices.Sorted(maps.Keys(m)))
		}
	}
}

// fakeJobRow is one row of a claim's OUTPUT, in claimOutput order.
func fakeJobRow(id int64) []driver.Value {
	now := time.Now().UTC()
	return []driver.Value{id, "q", fmt.Sprint("kind_", id%2), []byte(fmt.Sprint("job ", id)), int64(id % 3), now.Add(-time.Duration(id) * time.Second),
		int64(0), int64(25), nil, nil, now, now.Add(time.Minute)}
}

// answerOK answers every statement the way a server would on success: a
// claim returns min(n, 3) jobs, lease statements take every lease.
func answerOK(s sentStmt) fakeAnswer {
	switch s.name {
	case sqlClaim, sqlClaimUpdLock:
		var rows [][]driver.Value
		for i := range min(int(s.args["n"].(int32)), 3) {
			rows = append(rows, fakeJobRow(int64(100+i)))
		}
		return fakeAnswer{rows: rows}
	case sqlEnqueue:
		var rows [][]driver.Value
		for i := 0; ; i++ {
			if _, ok := s.args[fmt.Sprint("q", i)]; !ok {
				break
			}
			rows = append(rows, []driver.Value{int64(1000 + i)})
		}
		return fakeAnswer{rows: rows}
	case sqlComplete, sqlRetry, sqlRelease, sqlExtend:
		var rows [][]driver.Value
		for i := 0; ; i++ {
			id, ok := s.args[fmt.Sprint("i", i)]
			if !ok {
				break
			}
			rows = append(rows, []driver.Value{id})
		}
		return fakeAnswer{rows: rows}
	case sqlCancel, sqlRetryDeadIDs:
		var rows [][]driver.Value
		for i := 0; ; i++ {
			id, ok := s.args[fmt.Sprint("i", i)]
			if !ok {
				break
			}
			rows = append(rows, []driver.Value{id})
		}
		return fakeAnswer{rows: rows}
	case sqlRetryDeadAll:
		return fakeAnswer{rows: [][]driver.Value{{int64(7)}, {int64(5)}}}
	case sqlEnqueueUnique:
		return fakeAnswer{rows: [][]driver.Value{{int64(42), false}}}
	case sqlJobs:
		return fakeAnswer{rows: [][]driver.Value{fakeListRow(3, "ready"), fakeListRow(4, "claimed")}}
	case sqlPaused:
		return fakeAnswer{rows: [][]driver.Value{{"a"}, {"b"}}}
	case sqlRescue:
		return fakeAnswer{rows: [][]driver.Value{{int64(0), int64(0)}}}
	case sqlStats:
		return fakeAnswer{rows: [][]driver.Value{{"q", int64(1), int64(2), int64(3), int64(4), int64(1_500_000), true}}}
	case sqlStatsByKind:
		return fakeAnswer{rows: [][]driver.Value{{"q", "", int64(1), int64(0), int64(0), int64(0)}, {"q", "email", int64(0), int64(2), int64(3), int64(4)}}}
	}
	return fakeAnswer{}
}

// Every statement the dialect sends — captured by a fake database/sql
// driver while the dialect does everything it does — parses, passes its
// spec, and is sent with exactly the parameters it uses. Every statement
// file is among them.
func TestEveryStatementSentIsChecked(t *testing.T) {
	ctx := context.Background()
	failEnqueue := false
	answer := func(s sentStmt) fakeAnswer {
		if s.name == sqlEnqueue && failEnqueue {
			return fakeAnswer{err: dupErr()}
		}
		return answerOK(s)
	}
	q, d, f := newFakeQueue(t, Config{}, answer)

	jobs := make([]queue.NewJob, 2*enqueueChunk+7)
	for i := range jobs {
		jobs[i] = queue.NewJob{Queue: "q", Payload: []byte("x"), Priority: int16(i % 5)}
	}
	jobs[3].DedupeKey = "k"
	jobs[4].RunAt = time.Now().Add(time.Hour)
	jobs[5].Delay = 1500 * time.Millisecond
	jobs[6].Kind = "email"
	ids, err := q.Enqueue(ctx, jobs...)
	if err != nil || len(ids) != len(jobs) {
		t.Fatalf("Enqueue: %d ids, %v", len(ids), err)
	}
	if first := f.named(sqlEnqueue)[0].args; first["kn6"] != "email" || first["kn5"] != "" {
		t.Errorf("enqueue sent kinds %q and %q, want the jobs' own", first["kn6"], first["kn5"])
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueTx(ctx, tx, jobs[:2]...); err != nil {
		t.Fatal(err)
	}
	failEnqueue = true
	if _, err := q.EnqueueTx(ctx, tx, jobs[:2]...); !errors.Is(err, queue.ErrDuplicate) {
		t.Fatalf("EnqueueTx with a duplicate: %v", err)
	}
	failEnqueue = false
	_ = tx.Rollback()

	c, _ := q.NewClaimer(ctx)
	held, err := c.Claim(ctx, "q", 5)
	if err != nil || len(held) != 3 {
		t.Fatalf("Claim: %d jobs, %v", len(held), err)
	}
	for _, j := range held {
		if want := fmt.Sprint("kind_", j.ID%2); j.Kind != want {
			t.Errorf("claimed job %d has kind %q, want %q", j.ID, j.Kind, want)
		}
	}
	ls := []queue.Lease{held[0].Lease(), held[1].Lease()}
	for name, err := range map[string]error{
		"Extend":   c.Extend(ctx, ls),
		"Complete": c.Complete(ctx, ls[:1]),
		"Retry": c.Retry(ctx, []queue.RetryParams{{Lease: ls[1], Error: "boom", Delay: time.Minute, Dead: true},
			{Lease: queue.Lease{ID: 101, Token: 9}, Delay: time.Second, Snooze: true}}),
		"Release": c.Release(ctx, []queue.Lease{held[2].Lease()}),
	} {
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, err := q.Stats(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := q.StatsByKind(ctx); err != nil || len(got) != 2 || got[1].Kind != "email" || got[1].Dead != 4 {
		t.Fatalf("StatsByKind = %+v, %v", got, err)
	}
	if _, err := d.Rescue(ctx); err != nil {
		t.Fatal(err)
	}
	// The Admin statements, in the driver's transaction and the caller's.
	if _, _, err := q.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "q", DedupeKey: "u", RunAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	utx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.EnqueueUnique(ctx, utx, queue.NewJob{Queue: "q", DedupeKey: "u", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	_ = utx.Rollback()
	if _, err := q.Jobs(ctx, queue.JobFilter{Queue: "q", State: queue.StateDead, AfterID: 5, Limit: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Cancel(ctx, 1, 2, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := q.RetryDead(ctx, "q", 4, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := q.RetryDead(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if err := q.Pause(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Paused(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Claim(ctx, "q", 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(ctx); err != nil { // releases the job just claimed
		t.Fatal(err)
	}
	uq, _, uf := newFakeQueue(t, Config{Strategy: UpdLock}, answerOK)
	uc, _ := uq.NewClaimer(ctx)
	if _, err := uc.Claim(ctx, "q", 2); err != nil {
		t.Fatal(err)
	}
	// A claim cut off by its context: the claimer gives back what its
	// token may have claimed.
	cq, _, cf := newFakeQueue(t, Config{}, func(s sentStmt) fakeAnswer {
		if s.name == sqlClaim {
			return fakeAnswer{rows: [][]driver.Value{fakeJobRow(1)}, rowsErr: context.Canceled}
		}
		return answerOK(s)
	})
	cc, _ := cq.NewClaimer(ctx)
	if _, err := cc.Claim(ctx, "q", 1); err == nil {
		t.Fatal("cut-off claim succeeded")
	}

	sent := append(append(append(f.statements(), uf.statements()...), cf.statements()...), scheduleStatementsSent(t)...)
	sent = append(sent, activityStatementsSent(t)...)
	sent = append(sent, countStatementsSent(t)...)
	seen := map[string]int{}
	for _, s := range sent {
		if s.name == "" {
			t.Errorf("sent a statement from no sql/ file:\n%s", s.query)
			continue
		}
		seen[s.name]++
		if err := checkSQL(s.name, s.query, s.args); err != nil {
			t.Errorf("%v\n%s", err, s.query)
		}
		if len(s.args) >= maxParams {
			t.Errorf("%s sent with %d parameters; SQL Server takes fewer than %d", s.name, len(s.args), maxParams)
		}
	}
	for _, name := range d.sql.names() {
		if seen[name] == 0 {
			t.Errorf("%s was never sent: test it or delete it", name)
		}
	}
	if seen[sqlEnqueue] < 3 {
		t.Errorf("a %d-job enqueue sent %d INSERTs", len(jobs), seen[sqlEnqueue])
	}
	t.Logf("checked %d statements: %v", len(sent), seen)
}

// The statements the driver sends inside a transaction are the enqueue
// ones; every claim and lease statement is autocommit.
func TestClaimAndLeaseStatementsAreAutocommit(t *testing.T) {
	ctx := context.Background()
	q, _, f := newFakeQueue(t, Config{}, answerOK)
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	c, _ := q.NewClaimer(ctx)
	jobs, err := c.Claim(ctx, "q", 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Complete(ctx, []queue.Lease{jobs[0].Lease()}); err != nil {
		t.Fatal(err)
	}
	for _, s := range f.statements() {
		if s.tx != (s.name == sqlEnqueue) {
			t.Errorf("%s sent inside a transaction: %v", s.name, s.tx)
		}
	}
}

// migrationVersion parses the up and down statements of one migration
// file, rendered with testNames.
func migrationVersion(t *testing.T, file string) (up, down []ast.Statement) {
	t.Helper()
	fsys, err := migrations.FS(dialect.MSSQL, testNames)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(fsys, file)
	if err != nil {
		t.Fatal(err)
	}
	u, d, _ := strings.Cut(string(b), "-- +goose Down")
	if up, err = parseBatch(u); err != nil {
		t.Fatalf("%s up: %v", file, err)
	}
	if down, err = parseBatch(d); err != nil {
		t.Fatalf("%s down: %v", file, err)
	}
	return up, down
}

// The migration creates what the statements and the package doc rely on.
func TestMigrationShape(t *testing.T) {
	stmts, dropped := migrationVersion(t, "00001_jobs.sql")
	cols, err := columns()
	if err != nil {
		t.Fatal(err)
	}
	// Together the tables hold the logical columns of the other dialects.
	logical := []string{"id", "queue", "payload", "priority", "run_at", "attempt", "max_attempts", "state",
		"claim_token", "claimed_until", "last_error", "dedupe_key", "created_at"}
	have := map[string]bool{}
	for _, c := range append(slices.Clone(cols["jobs"]), cols["jobs_inflight"]...) {
		have[c] = true
	}
	for _, c := range logical {
		if !have[c] {
			t.Errorf("column %s in neither jobs nor jobs_inflight", c)
		}
	}
	escalation := map[string]string{}
	for _, a := range find[*ast.AlterTableSetStatement](stmts) {
		for _, o := range a.Options {
			if le, ok := o.(*ast.LockEscalationTableOption); ok {
				escalation[strings.TrimPrefix(a.SchemaObjectName.BaseIdentifier.Value, testNames.Prefix)] = le.Value
			}
		}
	}
	keys := map[string]string{}
	for _, ct := range find[*ast.CreateTableStatement](stmts) {
		table := strings.TrimPrefix(ct.SchemaObjectName.BaseIdentifier.Value, testNames.Prefix)
		if escalation[table] != "Disable" {
			t.Errorf("%s: LOCK_ESCALATION %q, want Disable", table, escalation[table])
		}
		for _, u := range find[*ast.UniqueConstraintDefinition](ct) {
			if u.IsPrimaryKey {
				var pk []string
				for _, c := range u.Columns {
					pk = append(pk, sqlOf(c.Column))
				}
				keys[table] = strings.Join(pk, ", ")
				if u.IndexType == nil || u.IndexType.IndexTypeKind != "Clustered" {
					t.Errorf("%s: primary key not clustered", table)
				}
			}
		}
		// OUTPUT INTO targets may have no CHECK constraints or foreign keys.
		if n := len(find[*ast.CheckConstraintDefinition](ct)) + len(find[*ast.ForeignKeyConstraintDefinition](ct)); n > 0 {
			t.Errorf("%s: %d CHECK or FOREIGN KEY constraints", table, n)
		}
		for _, c := range ct.Definition.ColumnDefinitions {
			switch c.ColumnIdentifier.Value {
			case "queue", "state", "dedupe_key":
				if c.Collation == nil || !strings.HasSuffix(c.Collation.Value, "_BIN2") {
					t.Errorf("%s.%s compares ignoring case", table, c.ColumnIdentifier.Value)
				}
			case "id":
				if c.IdentityOptions != nil {
					t.Errorf("%s.id is IDENTITY: moved rows could not keep their ids", table)
				}
			}
		}
	}
	want := map[string]string{
		"jobs":          "queue, state, priority, run_at, id", // claim order
		"jobs_inflight": "id",
		"jobs_dedupe":   "queue, dedupe_key",
	}
	if !maps.Equal(keys, want) {
		t.Errorf("primary keys %v, want %v", keys, want)
	}
	var idIndex bool
	for _, ix := range find[*ast.CreateIndexStatement](stmts) {
		if ix.Unique && strings.TrimPrefix(ix.OnName.BaseIdentifier.Value, testNames.Prefix) == "jobs" &&
			len(ix.Columns) == 1 && sqlOf(ix.Columns[0].Column) == "id" {
			idIndex = true
		}
	}
	if !idIndex {
		t.Error("no unique index on jobs(id): ids could repeat and the claim's DELETE could not seek by id")
	}
	seq := find[*ast.CreateSequenceStatement](stmts)
	if len(seq) != 1 || seq[0].Name.BaseIdentifier.Value != testNames.Prefix+"jobs_id_seq" {
		t.Error("no jobs_id_seq sequence")
	}
	if got := kinds(dropped); !slices.Equal(got, []string{"DropTableStatement", "DropTableStatement", "DropTableStatement", "DropSequenceStatement"}) {
		t.Errorf("down: %v", got)
	}
	var tables []string
	for table := range cols {
		tables = append(tables, table)
	}
	sort.Strings(tables)
	if !slices.Equal(tables, []string{"activity", "jobs", "jobs_dedupe", "jobs_inflight", "processes", "queues", "schedules"}) {
		t.Errorf("tables %v", tables)
	}
}

// Version 5 adds kind to both tables that hold a job's columns, so that no
// move between them loses it: NOT NULL, empty by default (a producer's
// INSERT that names no kind still works), wide enough for any kind of 100
// UTF-8 bytes, compared as a binary string. Down drops what Up added.
func TestKindMigration(t *testing.T) {
	stmts, dropped := migrationVersion(t, "00005_kind.sql")
	added := map[string]bool{}
	for _, s := range stmts {
		a, ok := s.(*ast.AlterTableAddTableElementStatement)
		if !ok {
			t.Errorf("up: a %T, want only ALTER TABLE ... ADD", s)
			continue
		}
		table := strings.TrimPrefix(a.SchemaObjectName.BaseIdentifier.Value, testNames.Prefix)
		cols := a.Definition.ColumnDefinitions
		if len(cols) != 1 || cols[0].ColumnIdentifier.Value != "kind" {
			t.Errorf("%s: adds %d columns, want kind alone", table, len(cols))
			continue
		}
		c := cols[0]
		added[table] = true
		if got := typeName(c.DataType); got != "NVARCHAR(100)" {
			t.Errorf("%s.kind is %s, want NVARCHAR(100)", table, got)
		}
		if c.Collation == nil || !strings.HasSuffix(c.Collation.Value, "_BIN2") {
			t.Errorf("%s.kind compares ignoring case", table)
		}
		notNull := c.Nullable != nil && !c.Nullable.Nullable
		for _, n := range find[*ast.NullableConstraintDefinition](c.Constraints) {
			notNull = notNull || !n.Nullable
		}
		if !notNull {
			t.Errorf("%s.kind may be NULL", table)
		}
		if c.DefaultConstraint == nil || sqlOf(c.DefaultConstraint.Expression) != "''" {
			t.Errorf("%s.kind has no default ''", table)
		} else if id := c.DefaultConstraint.ConstraintIdentifier; id == nil || id.Value != testNames.Prefix+table+"_kind_default" {
			t.Errorf("%s.kind: default constraint unnamed or misnamed; down could not drop it", table)
		}
	}
	if !maps.Equal(added, map[string]bool{"jobs": true, "jobs_inflight": true}) {
		t.Errorf("kind added to %v, want jobs and jobs_inflight", slices.Sorted(maps.Keys(added)))
	}
	var got []string
	for _, s := range dropped {
		d, ok := s.(*ast.AlterTableDropTableElementStatement)
		if !ok {
			t.Errorf("down: a %T", s)
			continue
		}
		for _, e := range d.AlterTableDropTableElements {
			got = append(got, strings.TrimPrefix(d.SchemaObjectName.BaseIdentifier.Value, testNames.Prefix)+" "+
				e.TableElementType+" "+strings.TrimPrefix(e.Name.Value, testNames.Prefix))
		}
	}
	want := []string{"jobs_inflight Constraint jobs_inflight_kind_default", "jobs_inflight Column kind",
		"jobs Constraint jobs_kind_default", "jobs Column kind"}
	if !slices.Equal(got, want) {
		t.Errorf("down: %q, want %q", got, want)
	}
}
