package mssql

// The specs of the activity statements (see tsql_test.go for the checker),
// the fake-driver run that sends each of them, and the shape of migration
// 00006.

import (
	"context"
	"database/sql/driver"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/sqlc-dev/teesql/ast"
)

func init() {
	for name, spec := range activitySpecs {
		specs[name] = spec
	}
}

var activityColumns = []string{"minute", "queue", "kind", "process", "completed", "retried", "dead"}

var activitySpecs = map[string]func(c *checker, stmts []ast.Statement){
	sqlActivityAdd: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"PredicateSetStatement", "PredicateSetStatement",
			"BeginTransactionStatement", "UpdateStatement", "InsertStatement", "CommitTransactionStatement"})
		if len(stmts) != 6 {
			return
		}
		c.setOn(stmts[:2], "NoCount", "XactAbort")
		// The whole key joins, so each process adds to its own rows;
		// counts add, never overwrite.
		key := []string{"a.kind = s.kind", "a.minute = s.minute", "a.process = s.process", "a.queue = s.queue"}
		up, _ := dmlOf(stmts[3])
		c.eq("SET", sqlOfAll(up.set), []string{"completed = a.completed + s.completed", "retried = a.retried + s.retried",
			"dead = a.dead + s.dead"})
		if up.from == nil || len(up.from.TableReferences) != 1 {
			c.errorf("UPDATE: want FROM one join")
		} else if j, ok := up.from.TableReferences[0].(*ast.QualifiedJoin); !ok || j.QualifiedJoinType != "Inner" {
			c.errorf("UPDATE: FROM %T, want an inner join", up.from.TableReferences[0])
		} else {
			c.table("UPDATE joined table", j.FirstTableReference, "activity", "a", "updlock", "holdlock")
			c.eq("UPDATE join condition", conjuncts(j.SearchCondition), key)
		}
		ins, _ := dmlOf(stmts[4])
		if ins.insert == nil {
			return
		}
		c.eq("INSERT columns", sqlOfAll(ins.insert.Columns), activityColumns)
		// Only the rows the UPDATE did not find, under the same locks.
		sub := find[*ast.QuerySpecification](ins.insert)
		if len(sub) != 2 || sub[0].WhereClause == nil || sub[1].WhereClause == nil ||
			len(find[*ast.ExistsPredicate](find[*ast.BooleanNotExpression](sub[0].WhereClause))) != 1 {
			c.errorf("INSERT: want SELECT ... WHERE NOT EXISTS (SELECT ... WHERE key)")
			return
		}
		c.eq("NOT EXISTS table", tableRefs(sub[1]), []string{"activity AS a WITH (holdlock, updlock)"})
		c.eq("NOT EXISTS condition", conjuncts(sub[1].WhereClause.SearchCondition), key)
		for _, v := range find[*ast.InlineDerivedTable](stmts) {
			var cols []string
			for _, id := range v.Columns {
				cols = append(cols, id.Value)
			}
			c.eq("VALUES columns", cols, activityColumns)
		}
	},
	sqlActivity: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"SelectStatement"})
		c.eq("table references", tableRefs(stmts), []string{"activity"})
		q := selectOf(stmts[0])
		if q == nil || q.GroupByClause == nil || q.OrderByClause == nil || q.WhereClause == nil {
			c.errorf("want SELECT ... WHERE ... GROUP BY ... ORDER BY")
			return
		}
		c.eq("columns", sqlOfAll(q.SelectElements), []string{"queue", "minute", "SUM(completed)", "SUM(retried)", "SUM(dead)"})
		c.eq("WHERE", conjuncts(q.WhereClause.SearchCondition), []string{"minute >= CONVERT(DATETIME2(0), SWITCHOFFSET(@since, '+00:00'))"})
		c.eq("group", sqlOfAll(q.GroupByClause.GroupingSpecifications), []string{"queue", "minute"})
		c.eq("order", sqlOfAll(q.OrderByClause.OrderByElements), []string{"queue", "minute"})
	},
	sqlActivityPrune: func(c *checker, stmts []ast.Statement) {
		// No SET NOCOUNT ON: PruneActivity reads the rows affected, which
		// it would make 0.
		c.eq("statements", kinds(stmts), []string{"DeleteStatement"})
		if len(stmts) != 1 {
			return
		}
		del, _ := dmlOf(stmts[0])
		// Bounded: a backlog is pruned a batch at a time.
		c.top("DELETE", del.top, "@limit")
		c.table("DELETE target", del.target, "activity", "")
		if del.where == nil {
			c.errorf("DELETE without WHERE")
			return
		}
		c.eq("WHERE", conjuncts(del.where.SearchCondition), []string{"minute < CONVERT(DATETIME2(0), SWITCHOFFSET(@before, '+00:00'))"})
	},
	sqlProcessTouch: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"PredicateSetStatement", "PredicateSetStatement",
			"BeginTransactionStatement", "UpdateStatement", "IfStatement", "CommitTransactionStatement"})
		c.eq("table references", tableRefs(stmts), []string{"processes", "processes WITH (holdlock, updlock)"})
		if len(stmts) != 6 {
			return
		}
		c.setOn(stmts[:2], "NoCount", "XactAbort")
		up, _ := dmlOf(stmts[3])
		// A heartbeat leaves host, pid and start as the first one stored.
		c.eq("SET", sqlOfAll(up.set), []string{"queues = @queues", "concurrency = @concurrency", "seen_at = " + utcParam("@seen")})
		if up.where == nil {
			c.errorf("UPDATE without WHERE")
		} else {
			c.eq("WHERE", conjuncts(up.where.SearchCondition), []string{"id = @id"})
		}
		ifs := stmts[4].(*ast.IfStatement)
		c.eq("IF", sqlOf(ifs.Predicate), "@@ROWCOUNT = 0")
		ins, ok := dmlOf(ifs.ThenStatement)
		if !ok || ins.insert == nil {
			c.errorf("IF ... THEN is not an INSERT")
			return
		}
		c.eq("INSERT columns", sqlOfAll(ins.insert.Columns), []string{"id", "host", "pid", "queues", "concurrency", "started_at", "seen_at"})
	},
	sqlProcessRemove: func(c *checker, stmts []ast.Statement) {
		c.checkDelete(stmts, "processes", "id = @id")
	},
	sqlProcessPrune: func(c *checker, stmts []ast.Statement) {
		c.checkDelete(stmts, "processes", "seen_at < "+utcParam("@before"))
	},
	sqlProcesses: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"SelectStatement"})
		c.eq("table references", tableRefs(stmts), []string{"processes"})
		q := selectOf(stmts[0])
		if q == nil || q.OrderByClause == nil {
			c.errorf("want SELECT ... ORDER BY")
			return
		}
		c.eq("columns", sqlOfAll(q.SelectElements), []string{"id", "host", "pid", "queues", "concurrency", "started_at", "seen_at"})
		c.eq("order", sqlOfAll(q.OrderByClause.OrderByElements), []string{"started_at", "id"})
		if o := q.OrderByClause.OrderByElements; len(o) == 2 && o[0].SortOrder != "Descending" {
			c.errorf("processes not latest first")
		}
	},
}

// checkDelete checks a SET NOCOUNT ON; DELETE FROM table WHERE where.
func (c *checker) checkDelete(stmts []ast.Statement, table, where string) {
	c.eq("statements", kinds(stmts), []string{"PredicateSetStatement", "DeleteStatement"})
	if len(stmts) != 2 {
		return
	}
	del, _ := dmlOf(stmts[1])
	c.table("DELETE target", del.target, table, "")
	if del.where == nil {
		c.errorf("DELETE without WHERE")
		return
	}
	c.eq("WHERE", conjuncts(del.where.SearchCondition), []string{where})
}

// The checker rejects activity statements that parse but lose what they
// promise: counts that add, a key that keeps processes apart, a bounded
// prune, a heartbeat that keeps the start.
func TestCheckerRejectsActivity(t *testing.T) {
	stmts, err := renderStatements(testNames)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, old, new string }{
		{sqlActivityAdd, "completed = a.completed + s.completed", "completed = s.completed"},
		{sqlActivityAdd, " AND a.process = s.process", ""},
		{sqlActivityAdd, "WHERE NOT EXISTS", "WHERE EXISTS"},
		{sqlActivityPrune, "TOP (@limit) ", ""},
		{sqlProcessTouch, "concurrency = @concurrency,", "concurrency = @concurrency, started_at = SYSUTCDATETIME(),"},
		{sqlProcesses, "started_at DESC", "started_at"},
		{sqlProcessRemove, "WHERE id = @id", ""},
	} {
		text := exampleRows(stmts, c.name, 2)
		if !strings.Contains(text, c.old) {
			t.Fatalf("%s has no %q; fix the test", c.name, c.old)
		}
		if err := checkSQL(c.name, strings.Replace(text, c.old, c.new, 1), nil); err == nil {
			t.Errorf("%s without %q passes", c.name, c.old)
		}
	}
}

// activityStatementsSent drives every ActivityStore method over a fake
// database and returns what it sent, for TestEveryStatementSentIsChecked.
// It checks the results the driver makes of the scripted answers.
func activityStatementsSent(t *testing.T) []sentStmt {
	t.Helper()
	ctx := context.Background()
	m := time.Date(2026, 1, 1, 12, 30, 0, 0, time.UTC)
	q, d, f := newFakeQueue(t, Config{}, func(s sentStmt) fakeAnswer {
		switch s.name {
		case sqlActivity:
			return fakeAnswer{rows: [][]driver.Value{{"q", m, int64(3), int64(2), int64(1)}}}
		case sqlProcesses:
			return fakeAnswer{rows: [][]driver.Value{{"abc", "host", int64(7), "a,b", int64(4), m, m}}}
		case sqlActivityPrune:
			return fakeAnswer{affected: 5}
		}
		return answerOK(s)
	})
	counts := []queue.ActivityCount{{Process: "abc", Queue: "q", Minute: m, Completed: 3},
		{Process: "abc", Queue: "q", Kind: "émail", Minute: m, Retried: 2, Dead: 1}}
	if err := d.AddActivity(ctx, counts); err != nil {
		t.Fatal(err)
	}
	if sent := f.named(sqlActivityAdd); len(sent) != 1 || sent[0].args["k1"] != "émail" || sent[0].args["c0"] != int64(3) {
		t.Errorf("activity_add sent %+v", sent)
	}
	got, err := q.Activity(ctx, m)
	if err != nil || len(got) != 1 || got[0].Completed != 3 || got[0].Dead != 1 || !got[0].Minute.Equal(m) {
		t.Fatalf("Activity: %+v, %v", got, err)
	}
	p := queue.ProcessInfo{ID: "abc", Host: "host", PID: 7, Queues: []string{"a", "b"}, Concurrency: 4, StartedAt: m, SeenAt: m}
	if err := d.TouchProcess(ctx, p); err != nil {
		t.Fatal(err)
	}
	ps, err := q.Processes(ctx)
	if err != nil || len(ps) != 1 || !slices.Equal(ps[0].Queues, p.Queues) || ps[0].PID != 7 || !ps[0].SeenAt.Equal(m) {
		t.Fatalf("Processes: %+v, %v", ps, err)
	}
	if err := d.RemoveProcess(ctx, "abc"); err != nil {
		t.Fatal(err)
	}
	n, err := d.PruneActivity(ctx, queue.ActivityPrune{Before: m, Limit: 100, ProcessesSeenBefore: m})
	if err != nil || n != 5 {
		t.Fatalf("PruneActivity: %d, %v", n, err)
	}
	for _, s := range f.statements() {
		if s.tx {
			t.Errorf("%s sent in a transaction", s.name)
		}
	}
	return f.statements()
}

// Version 6 makes the activity and processes tables: clustered keys that
// keep each process's rows apart (activity leads with minute, for the
// hour read and the prune), names compared as binary strings; Down drops
// both.
func TestActivityMigration(t *testing.T) {
	up, down := migrationVersion(t, "00006_activity.sql")
	keys := map[string]string{}
	for _, ct := range find[*ast.CreateTableStatement](up) {
		table := strings.TrimPrefix(ct.SchemaObjectName.BaseIdentifier.Value, testNames.Prefix)
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
		for _, c := range ct.Definition.ColumnDefinitions {
			switch c.ColumnIdentifier.Value {
			case "queue", "kind", "process", "id", "queues":
				if c.Collation == nil || !strings.HasSuffix(c.Collation.Value, "_BIN2") {
					t.Errorf("%s.%s compares ignoring case", table, c.ColumnIdentifier.Value)
				}
			}
		}
	}
	want := map[string]string{"activity": "minute, queue, kind, process", "processes": "id"}
	if len(keys) != 2 || keys["activity"] != want["activity"] || keys["processes"] != want["processes"] {
		t.Errorf("primary keys %v, want %v", keys, want)
	}
	if got := kinds(down); !slices.Equal(got, []string{"DropTableStatement", "DropTableStatement"}) {
		t.Errorf("down: %v", got)
	}
}
