package mssql

// The specs of the move statements (see tsql_test.go for the checker), and
// the Mover driven through the fake database, every statement it sends
// checked.

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/sqlc-dev/teesql/ast"
)

// moveFilterWhere is the export filter, as conjuncts prints it.
var moveFilterWhere = []string{
	"((j.state = 'ready' AND j.run_at <= SYSUTCDATETIME() AND @ready = 1) OR " +
		"(j.state = 'ready' AND j.run_at > SYSUTCDATETIME() AND @scheduled = 1) OR (j.state = 'dead' AND @dead = 1))",
	"(@all_queues = 1 OR j.queue IN (…))",
}

// movedColumns are the columns scanMoved reads, in order.
var movedColumns = []string{"j.id", "j.queue", "j.kind", "j.payload", "j.priority", "j.run_at", "j.attempt", "j.max_attempts",
	"j.state", "j.last_error", "j.dedupe_key", "j.created_at"}

// keyJoin checks the join of a key look-up: jobs_dedupe AS d WITH (hints)
// INNER JOIN (VALUES ...) AS l (queue, dedupe_key) on both columns.
func (c *checker) keyJoin(what string, j *ast.QualifiedJoin, hints ...string) {
	c.table(what+" keys", j.FirstTableReference, "jobs_dedupe", "d", hints...)
	v, ok := j.SecondTableReference.(*ast.InlineDerivedTable)
	if !ok || v.Alias == nil || v.Alias.Value != "l" {
		c.errorf("%s: joined %T, want (VALUES ...) AS l", what, j.SecondTableReference)
		return
	}
	c.eq(what+" VALUES columns", identNames(v.Columns), []string{"queue", "dedupe_key"})
	c.eq(what+" join", conjuncts(j.SearchCondition), []string{"d.dedupe_key = l.dedupe_key", "d.queue = l.queue"})
}

var moveSpecs = map[string]func(c *checker, stmts []ast.Statement){
	sqlMoveIdentity: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"SelectStatement"})
		c.eq("table references", tableRefs(stmts), []string(nil))
	},
	sqlMoveSurvey: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"SelectStatement"})
		c.eq("table references", tableRefs(stmts), []string{"jobs AS j"})
		q := selectOf(stmts[0])
		if q == nil || q.WhereClause == nil {
			c.errorf("want SELECT ... WHERE")
			return
		}
		c.eq("WHERE", conjuncts(q.WhereClause.SearchCondition), moveFilterWhere)
		var measured []string
		for _, f := range find[*ast.FunctionCall](q.SelectElements) {
			if f.FunctionName.Value == "DATALENGTH" {
				measured = append(measured, sqlOf(f))
			}
		}
		c.eq("measured", measured, []string{"DATALENGTH(j.payload)", "DATALENGTH(k.utf8)", "DATALENGTH(j.dedupe_key)"})
	},
	sqlMoveExport: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"SelectStatement"})
		// Only jobs: held jobs stay in jobs_inflight. Each row locked
		// until the batch ends, locked rows skipped.
		c.eq("table references", tableRefs(stmts), []string{"jobs AS j WITH (readcommittedlock, readpast, rowlock, updlock)"})
		q := selectOf(stmts[0])
		if q == nil || q.WhereClause == nil || q.OrderByClause == nil {
			c.errorf("want SELECT TOP ... WHERE ... ORDER BY")
			return
		}
		c.top("export", q.TopRowFilter, "@limit")
		c.eq("columns", sqlOfAll(q.SelectElements), movedColumns)
		c.eq("WHERE", conjuncts(q.WhereClause.SearchCondition), sorted(append([]string{"j.id > @after"}, moveFilterWhere...)))
		c.eq("order", sqlOfAll(q.OrderByClause.OrderByElements), []string{"j.id"})
	},
	sqlMoveDelete: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"PredicateSetStatement", "DeclareTableVariableStatement",
			"DeleteStatement", "DeleteStatement", "SelectStatement"})
		c.eq("table references", tableRefs(stmts), []string{"alias d", "alias j",
			"jobs AS j WITH (forceseek, rowlock)", "jobs_dedupe AS d WITH (forceseek, rowlock)"})
		if len(stmts) != 5 {
			return
		}
		c.setOn(stmts[:1], "NoCount")
		del, _ := dmlOf(stmts[2])
		c.idJoin("delete", del)
		if del.where != nil {
			c.errorf("delete: unexpected WHERE")
		}
		if del.into == nil {
			c.errorf("delete: no OUTPUT ... INTO @gone")
		} else {
			c.eq("delete OUTPUT INTO", sqlOfAll(del.into.SelectColumns), []string{"deleted.id", "deleted.queue", "deleted.dedupe_key"})
		}
		keys, _ := dmlOf(stmts[3])
		c.table("dedupe target", keys.target, "alias d", "")
		if j := find[*ast.QualifiedJoin](keys.from); len(j) != 1 {
			c.errorf("dedupe delete: want one join")
		} else {
			c.table("dedupe table", j[0].FirstTableReference, "jobs_dedupe", "d", "rowlock", "forceseek")
			c.eq("dedupe join", conjuncts(j[0].SearchCondition), []string{"d.dedupe_key = x.dedupe_key", "d.id = x.id", "d.queue = x.queue"})
		}
		c.eq("result", sqlOfAll(selectOf(stmts[4]).SelectElements), []string{"id"})
	},
	sqlMoveExisting: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"SelectStatement"})
		c.eq("table references", tableRefs(stmts), []string{"jobs_dedupe AS d WITH (forceseek, holdlock, rowlock, updlock)"})
		q := selectOf(stmts[0])
		if q == nil || q.WhereClause != nil {
			c.errorf("want SELECT ... FROM a join, no WHERE")
			return
		}
		c.eq("columns", sqlOfAll(q.SelectElements), []string{"d.queue", "d.dedupe_key", "d.id"})
		if j := find[*ast.QualifiedJoin](q.FromClause); len(j) != 1 {
			c.errorf("want one join")
		} else {
			c.keyJoin("existing", j[0], "updlock", "holdlock", "rowlock", "forceseek")
		}
	},
	sqlMoveInsert: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"PredicateSetStatement", "DeclareTableVariableStatement",
			"InsertStatement", "InsertStatement", "SelectStatement"})
		c.eq("table references", tableRefs(stmts), []string{"jobs", "jobs_dedupe"})
		if len(stmts) != 5 {
			return
		}
		cols, err := columns()
		if err != nil {
			c.errorf("migration: %v", err)
			return
		}
		ins, _ := dmlOf(stmts[2])
		c.table("INSERT target", ins.target, "jobs", "")
		names := sqlOfAll(ins.insert.Columns)
		c.eq("INSERT columns (sorted)", sorted(names), sorted(cols["jobs"]))
		src, ok := ins.insert.InsertSource.(*ast.SelectInsertSource)
		if !ok {
			c.errorf("INSERT source is a %T, want SELECT ... FROM (VALUES ...)", ins.insert.InsertSource)
			return
		}
		sel, _ := src.Select.(*ast.QuerySpecification)
		if sel == nil || len(sel.SelectElements) != len(names) {
			c.errorf("INSERT SELECT is not as wide as its columns")
			return
		}
		utc := func(v string) string { return "CONVERT(DATETIME2(6), SWITCHOFFSET(" + v + ", '+00:00'))" }
		want := map[string]string{"id": "NEXT VALUE FOR pfx_jobs_id_seq", "run_at": utc("v.run_at"), "created_at": utc("v.created_at")}
		for i, col := range names {
			w, ok := want[col]
			if !ok {
				w = "v." + col // kept as it was
			}
			c.eq("value for "+col, sqlOf(sel.SelectElements[i]), w)
		}
		if n := find[*ast.NextValueForExpression](sel); len(n) != 1 || n[0].OverClause == nil {
			c.errorf("ids not drawn in input order (NEXT VALUE FOR ... OVER (ORDER BY v.ord))")
		}
		if v := find[*ast.InlineDerivedTable](sel); len(v) != 1 || v[0].Alias == nil || v[0].Alias.Value != "v" {
			c.errorf("want FROM (VALUES ...) AS v")
		} else {
			c.eq("VALUES columns", identNames(v[0].Columns), []string{"ord", "queue", "kind", "payload", "priority", "run_at",
				"attempt", "max_attempts", "state", "last_error", "dedupe_key", "created_at"})
		}
		keys, _ := dmlOf(stmts[3])
		c.table("dedupe INSERT target", keys.target, "jobs_dedupe", "")
		c.eq("result", sqlOfAll(selectOf(stmts[4]).SelectElements), []string{"id"})
	},
	sqlMoveStored: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"SelectStatement"})
		// Both tables: an existing job may be held.
		c.eq("table references", tableRefs(stmts), []string{"jobs", "jobs_dedupe AS d WITH (forceseek)", "jobs_inflight"})
		q := selectOf(stmts[0])
		if q == nil {
			c.errorf("not a SELECT")
			return
		}
		c.eq("columns", sqlOfAll(q.SelectElements), movedColumns)
		joins := find[*ast.QualifiedJoin](q.FromClause)
		if len(joins) != 2 {
			c.errorf("want two joins, got %d", len(joins))
			return
		}
		c.eq("job join", conjuncts(joins[0].SearchCondition), []string{"j.id = d.id"})
		if inner, ok := joins[0].FirstTableReference.(*ast.QualifiedJoin); ok {
			c.keyJoin("stored", inner, "forceseek")
		} else {
			c.errorf("want (jobs_dedupe JOIN VALUES) JOIN jobs")
		}
	},
}

func identNames(ids []*ast.Identifier) []string {
	var out []string
	for _, id := range ids {
		out = append(out, id.Value)
	}
	return out
}

// checkMoveSQL is checkSQL for the move statements.
func checkMoveSQL(name, text string, args map[string]any) error {
	spec, ok := moveSpecs[name]
	if !ok {
		return fmt.Errorf("%s: no spec", name)
	}
	specs[name] = spec
	defer delete(specs, name)
	return checkSQL(name, text, args)
}

// moveRender renders the move statements with testNames.
func moveRender(t *testing.T) *statements {
	t.Helper()
	s, err := loadStatements(movePattern, testNames)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every move statement file renders, parses, and passes its spec.
func TestMoveStatementsMatchTheirSpecs(t *testing.T) {
	stmts := moveRender(t)
	if got, want := stmts.names(), slices.Sorted(maps.Keys(moveSpecs)); !slices.Equal(got, want) {
		t.Fatalf("statement files %v, specs %v", got, want)
	}
	for _, name := range stmts.names() {
		text := exampleRows(stmts, name, 1)
		if strings.Contains(text, "--") || strings.Contains(text, "dbq_jobs") || strings.Contains(text, "{{table") {
			t.Errorf("%s: comment, default prefix or marker left in:\n%s", name, text)
		}
		for _, n := range []int{1, 3} {
			if err := checkMoveSQL(name, exampleRows(stmts, name, n), nil); err != nil {
				t.Errorf("%d rows: %v", n, err)
			}
		}
	}
}

// The checker rejects move statements that lack what the move relies on.
func TestCheckerRejectsMove(t *testing.T) {
	stmts := moveRender(t)
	for _, tc := range []struct{ name, stmt, old, new string }{
		{"export that waits on locked rows", sqlMoveExport, "UPDLOCK, ROWLOCK, READPAST, READCOMMITTEDLOCK", "UPDLOCK, ROWLOCK, READCOMMITTEDLOCK"},
		{"export that locks nothing", sqlMoveExport, "WITH (UPDLOCK, ROWLOCK, READPAST, READCOMMITTEDLOCK)", "WITH (READPAST, READCOMMITTEDLOCK)"},
		{"export of held jobs", sqlMoveExport, `[s1].[pfx_jobs] AS j`, `[s1].[pfx_jobs_inflight] AS j`},
		{"export with a spliced cursor", sqlMoveExport, "j.id > @after", "j.id > 42"},
		{"export out of id order", sqlMoveExport, "ORDER BY j.id", "ORDER BY j.priority"},
		{"export without the queue filter", sqlMoveExport, "AND (@all_queues = 1 OR", "OR (@all_queues = 1 OR"},
		{"commit that keeps the keys", sqlMoveDelete, "DELETE d\nFROM", "SELECT d.id\nFROM"},
		{"commit free to scan", sqlMoveDelete, "AS j WITH (ROWLOCK, FORCESEEK)", "AS j WITH (ROWLOCK)"},
		{"look-up without HOLDLOCK", sqlMoveExisting, "UPDLOCK, HOLDLOCK, ROWLOCK", "UPDLOCK, ROWLOCK"},
		{"import that resets attempts", sqlMoveInsert, "v.attempt, v.max_attempts", "0, v.max_attempts"},
		{"import with a spliced state", sqlMoveInsert, "v.state, v.last_error", "'ready', v.last_error"},
		{"read back without held jobs", sqlMoveStored, "    UNION ALL\n    SELECT id, queue, kind, payload, priority, run_at, attempt, max_attempts, 'claimed', last_error, dedupe_key, created_at\n    FROM [s1].[pfx_jobs_inflight]\n", "\n"},
		{"export that loses kinds", sqlMoveExport, "j.queue, j.kind, j.payload", "j.queue, j.payload"},
		{"import that drops kinds", sqlMoveInsert, "v.queue, v.kind, v.payload", "v.queue, N'', v.payload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := exampleRows(stmts, tc.stmt, 2)
			if !strings.Contains(text, tc.old) {
				t.Fatalf("%s has no %q; fix the test", tc.stmt, tc.old)
			}
			text = strings.Replace(text, tc.old, tc.new, 1)
			if _, err := parseBatch(text); err != nil {
				t.Fatalf("does not parse (%v); the test wants a statement only the tree check rejects", err)
			}
			if err := checkMoveSQL(tc.stmt, text, nil); err == nil {
				t.Fatalf("accepted:\n%s", text)
			} else {
				t.Logf("rejected: %v", err)
			}
		})
	}
}

// moveFake answers the move statements as a server holding the jobs of
// keys (queue + "/" + key → id) would.
type moveFake struct {
	stmts  *statements
	keys   map[string]int64
	nextID int64
}

func (m *moveFake) jobRow(id int64, q, key string) []driver.Value {
	now := time.Now().UTC().Truncate(time.Microsecond)
	return []driver.Value{id, q, "kind_" + q, []byte(fmt.Sprint("job ", id)), int64(1), now, int64(2), int64(25), "ready", "boom", key, now}
}

func (m *moveFake) answer(s sentStmt) fakeAnswer {
	pairs := func(f func(q, k string)) {
		for i := 0; ; i++ {
			q, ok := s.args[fmt.Sprint("q", i)]
			if !ok {
				return
			}
			f(fmt.Sprint(q), s.args[fmt.Sprint("k", i)].(string))
		}
	}
	var rows [][]driver.Value
	switch identify(m.stmts, s.query) {
	case sqlMoveIdentity:
		rows = append(rows, []driver.Value{"srv1", "app"})
	case sqlMoveSurvey:
		rows = append(rows, []driver.Value{int64(100), int64(12), int64(10)})
	case sqlMoveExport:
		for id := s.args["after"].(int64) + 1; id <= s.args["after"].(int64)+min(s.args["limit"].(int64), 3); id++ {
			rows = append(rows, m.jobRow(id, "q", ""))
		}
	case sqlMoveDelete:
		for i := 0; ; i++ {
			id, ok := s.args[fmt.Sprint("i", i)]
			if !ok {
				break
			}
			rows = append(rows, []driver.Value{id})
		}
	case sqlMoveExisting:
		pairs(func(q, k string) {
			if id, ok := m.keys[q+"/"+k]; ok {
				rows = append(rows, []driver.Value{q, k, id})
			}
		})
	case sqlMoveInsert:
		pairs(func(q, k string) {
			m.nextID++
			m.keys[q+"/"+k] = m.nextID
			rows = append(rows, []driver.Value{m.nextID})
		})
	case sqlMoveStored:
		pairs(func(q, k string) {
			if id, ok := m.keys[q+"/"+k]; ok {
				rows = append(rows, m.jobRow(id, q, k))
			}
		})
	}
	return fakeAnswer{rows: rows}
}

// The Mover, driven through the fake database: it sends only the move
// statements, each parsed, passing its spec and given exactly its
// parameters, under SQL Server's 2,100; the export and its commit run in
// one transaction, the import in another.
func TestMoveStatementsSentAreChecked(t *testing.T) {
	ctx := context.Background()
	m := &moveFake{stmts: moveRender(t), keys: map[string]int64{"q/old-1": 7, "q/old-2": 8}, nextID: 1000}
	_, d, f := newFakeQueue(t, Config{}, m.answer)

	id, err := d.Identity(ctx)
	if want := "sqlserver://srv1/app/[s1].[pfx_jobs]"; err != nil || id != want {
		t.Errorf("Identity = %q, %v; want %q", id, err, want)
	}
	s, err := d.Survey(ctx, queue.ExportFilter{Ready: true, Dead: true})
	if err != nil || s != (queue.Survey{MaxPayload: 100, MaxKeyBytes: 12, MaxKeyChars: 10}) {
		t.Errorf("Survey = %+v, %v", s, err)
	}
	if _, err := d.Survey(ctx, queue.ExportFilter{Queues: []string{"a", "b"}, Scheduled: true}); err != nil {
		t.Error(err)
	}
	if _, err := d.Survey(ctx, queue.ExportFilter{Queues: []string{"bad queue"}}); !errors.Is(err, queue.ErrInvalidQueue) {
		t.Errorf("Survey of a bad queue name: %v", err)
	}

	b, err := d.Export(ctx, queue.ExportFilter{Queues: []string{"q"}, Ready: true, AfterID: 10, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Jobs(); len(got) != 3 || got[0].ID != 11 || b.Cursor() != 13 || got[0].LastError != "boom" || got[0].Attempt != 2 ||
		got[0].Kind != "kind_q" {
		t.Fatalf("Export: %d jobs, cursor %d", len(got), b.Cursor())
	}
	if err := b.Commit(ctx, []int64{11, 99}); !errors.Is(err, queue.ErrInvalidJob) {
		t.Errorf("Commit of a job not in the batch: %v", err)
	}
	b, err = d.Export(ctx, queue.ExportFilter{Ready: true, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx, []int64{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := b.Rollback(); err != nil {
		t.Errorf("Rollback after Commit: %v", err)
	}
	if err := b.Commit(ctx, nil); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("second Commit: %v", err)
	}

	// More jobs than one insert and one key look-up take.
	jobs := []*queue.Job{{ID: 1, Queue: "q", DedupeKey: "old-1", State: queue.StateReady}}
	for i := range moveKeyChunk + 5 {
		jobs = append(jobs, &queue.Job{ID: int64(i + 2), Queue: "q", Kind: fmt.Sprint("kind_", i%3), DedupeKey: fmt.Sprint("k", i), State: queue.StateDead,
			Payload: []byte("p"), Attempt: 3, MaxAttempts: 5, LastError: "e\x00rr", RunAt: time.Now()})
	}
	jobs = append(jobs, &queue.Job{ID: 9999, Queue: "q", DedupeKey: "k0", State: queue.StateReady}) // the same key again
	got, err := d.Import(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(jobs) || got[0].New || got[0].Job.ID != 7 || !got[1].New || got[1].Job.ID != 1001 ||
		got[len(got)-1].New != true || got[len(got)-1].Job.ID != 1001 || m.nextID != 1000+moveKeyChunk+5 {
		t.Errorf("Import: %d results; first %+v, second %+v; %d inserted", len(got), got[0], got[1], m.nextID-1000)
	}
	for _, bad := range []*queue.Job{
		{Queue: "q", State: queue.StateReady},
		{Queue: "q", DedupeKey: "k", State: queue.StateClaimed},
		{Queue: "bad queue", DedupeKey: "k", State: queue.StateReady},
		{Queue: "q", DedupeKey: strings.Repeat("😀", 101), State: queue.StateReady},
		{Queue: "q", DedupeKey: "k", Kind: strings.Repeat("k", queue.MaxKindLen+1), State: queue.StateReady},
		{Queue: "q", DedupeKey: "k", Kind: "bad\nkind", State: queue.StateReady},
		{Queue: "q", DedupeKey: "k", Kind: "bad\xffkind", State: queue.StateReady},
	} {
		if _, err := d.Import(ctx, []*queue.Job{bad}); err == nil {
			t.Errorf("Import of %+v accepted", bad)
		}
	}
	if _, err := d.Import(ctx, []*queue.Job{{Queue: "q", DedupeKey: strings.Repeat("é", 200), State: queue.StateReady}}); err != nil {
		t.Errorf("Import of a 200-character key: %v", err)
	}

	seen := map[string]int{}
	kindsSent := map[any]int{} // the kinds the inserts stored
	for _, s := range f.statements() {
		name := identify(m.stmts, s.query)
		if name == "" {
			t.Errorf("sent a statement from no sql/move file:\n%s", s.query)
			continue
		}
		seen[name]++
		for i := 0; name == sqlMoveInsert; i++ {
			k, ok := s.args[fmt.Sprint("kn", i)]
			if !ok {
				break
			}
			kindsSent[k]++
		}
		if err := checkMoveSQL(name, s.query, s.args); err != nil {
			t.Errorf("%v\n%s", err, s.query)
		}
		if len(s.args) >= maxParams {
			t.Errorf("%s sent with %d parameters", name, len(s.args))
		}
		if inTx := name != sqlMoveIdentity && name != sqlMoveSurvey; s.tx != inTx {
			t.Errorf("%s: in a transaction %v, want %v", name, s.tx, inTx)
		}
	}
	for _, name := range m.stmts.names() {
		if seen[name] == 0 {
			t.Errorf("%s was never sent", name)
		}
	}
	if seen[sqlMoveInsert] < 6 || seen[sqlMoveExisting] < 3 {
		t.Errorf("an import of %d jobs sent %d inserts and %d look-ups", len(jobs), seen[sqlMoveInsert], seen[sqlMoveExisting])
	}
	if kindsSent["kind_0"] == 0 || kindsSent["kind_2"] == 0 || kindsSent[""] == 0 {
		t.Errorf("the inserts stored kinds %v; want each job's own, none lost", kindsSent)
	}
	t.Logf("checked: %v", seen)
}

// The largest chunk of each statement stays under SQL Server's 2,100
// parameters, counted in the rendered text.
func TestMoveChunksUnderParameterLimit(t *testing.T) {
	stmts := moveRender(t)
	for name, n := range map[string]int{sqlMoveSurvey: moveFilterQueues, sqlMoveExport: moveFilterQueues,
		sqlMoveDelete: moveDeleteChunk, sqlMoveExisting: moveKeyChunk, sqlMoveStored: moveKeyChunk, sqlMoveInsert: moveInsertChunk} {
		text := exampleRows(stmts, name, n)
		params := map[string]bool{}
		for _, m := range paramRe.FindAllStringSubmatch(text, -1) {
			params[m[1]] = true
		}
		delete(params, "gone")
		delete(params, "ids")
		if name == sqlMoveExport {
			params["limit"], params["after"] = true, true
		}
		if len(params) >= maxParams || len(params) < n {
			t.Errorf("%s with %d rows: %d parameters", name, n, len(params))
		}
	}
	qs := make([]string, moveFilterQueues+1)
	for i := range qs {
		qs[i] = fmt.Sprint("q", i)
	}
	if _, _, err := moveFilter(queue.ExportFilter{Queues: qs}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("a filter of %d queues: %v", len(qs), err)
	}
}
