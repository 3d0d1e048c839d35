package mssql

// The specs of the statements of CountQueues and FindDedupe (see
// tsql_test.go for the checker), and a run of both on the fake database.

import (
	"context"
	"database/sql/driver"
	"fmt"
	"strings"
	"testing"

	"github.com/dbqueue/dbq/queue"
	"github.com/sqlc-dev/teesql/ast"
)

func init() {
	for name, spec := range countSpecs {
		specs[name] = spec
	}
}

// topCounts returns, for each scalar subquery SELECT COUNT_BIG(*) FROM
// (SELECT TOP (...) ... ) AS c of q's columns, the TOP's count and the
// inner WHERE's conjuncts.
func topCounts(c *checker, q *ast.QuerySpecification) (tops []string, wheres [][]string) {
	for _, sub := range find[*ast.ScalarSubquery](q.SelectElements) {
		outer, ok := sub.QueryExpression.(*ast.QuerySpecification)
		if !ok || outer.FromClause == nil || len(outer.FromClause.TableReferences) != 1 {
			continue
		}
		dt, ok := outer.FromClause.TableReferences[0].(*ast.QueryDerivedTable)
		if !ok {
			continue
		}
		inner, ok := dt.QueryExpression.(*ast.QuerySpecification)
		if !ok || inner.TopRowFilter == nil || inner.WhereClause == nil {
			c.errorf("a count without TOP or WHERE: %s", sqlOf(sub))
			continue
		}
		tops = append(tops, sqlOf(inner.TopRowFilter.Expression))
		wheres = append(wheres, conjuncts(inner.WhereClause.SearchCondition))
	}
	return tops, wheres
}

var countSpecs = map[string]func(c *checker, stmts []ast.Statement){
	sqlQueueNames: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"PredicateSetStatement", "DeclareTableVariableStatement",
			"DeclareTableVariableStatement", "DeclareVariableStatement", "WhileStatement", "InsertStatement",
			"InsertStatement", "SelectStatement"})
		// jobs_inflight is read once, for every queue's held jobs.
		c.eq("table references", tableRefs(stmts), []string{"jobs", "jobs", "jobs_inflight AS i"})
		// Each step is a seek on the clustered key's first column.
		for _, q := range find[*ast.QuerySpecification](stmts) {
			if cols := sqlOfAll(q.SelectElements); len(cols) == 1 && cols[0] == "MIN(queue)" && q.WhereClause != nil {
				c.eq("step", conjuncts(q.WhereClause.SearchCondition), []string{"queue > @q"})
			}
		}
		if len(stmts) == 8 {
			if q := selectOf(stmts[7]); q == nil || q.OrderByClause == nil || len(q.SelectElements) != 2 {
				c.errorf("want the names and their held jobs, in order")
			}
		}
	},
	sqlCountQueue: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"PredicateSetStatement", "DeclareVariableStatement",
			"DeclareVariableStatement", "DeclareVariableStatement", "DeclareVariableStatement", "WhileStatement",
			"SelectStatement"})
		c.eq("table references", tableRefs(stmts), []string{"jobs", "jobs", "jobs", "jobs", "jobs", "jobs",
			"queues AS p"})
		// One reading of the clock: ready and scheduled split at one instant.
		var clock int
		for _, f := range find[*ast.FunctionCall](stmts) {
			if sqlOf(f) == "SYSUTCDATETIME()" {
				clock++
			}
		}
		c.eq("clock readings", clock, 1)
		if len(stmts) != 7 {
			return
		}
		q := selectOf(stmts[6])
		if q == nil || len(q.SelectElements) != 6 {
			c.errorf("want SELECT of four counts, the oldest wait and paused")
			return
		}
		c.eq("ready and scheduled", sqlOfAll(q.SelectElements[:2]), []string{"@ready", "@scheduled"})
		c.eq("held", sqlOf(q.SelectElements[2]), "CASE WHEN @held < @limit THEN @held ELSE @limit END")
		tops, wheres := topCounts(c, q)
		c.eq("count limits", tops, []string{"(@limit)"})
		if len(wheres) == 1 {
			c.eq("dead", wheres[0], []string{"queue = @queue", "state = 'dead'"})
		}
		// The skip from priority to priority, one seek each, and per
		// priority a seek into its due and its future range, each read
		// stopping at what its count still lacks of @limit.
		w := stmts[5].(*ast.WhileStatement)
		c.eq("WHILE", sqlOf(w.Predicate), "@p IS NOT NULL")
		var steps []string
		for _, q := range find[*ast.QuerySpecification](w.Statement) {
			if q.WhereClause != nil {
				steps = append(steps, strings.Join(conjuncts(q.WhereClause.SearchCondition), " AND "))
			}
		}
		c.eq("loop", steps, []string{"priority = @p AND queue = @queue AND state = 'ready'",
			"priority = @p AND queue = @queue AND run_at <= @now AND state = 'ready'",
			"priority = @p AND queue = @queue AND run_at > @now AND state = 'ready'",
			"priority > @p AND queue = @queue AND state = 'ready'"})
		var loopTops, adds []string
		for _, t := range find[*ast.TopRowFilter](w.Statement) {
			loopTops = append(loopTops, sqlOf(t.Expression))
		}
		for _, s := range find[*ast.SetVariableStatement](w.Statement) {
			if s.AssignmentKind == "AddEquals" {
				adds = append(adds, sqlOf(s.Variable))
			}
		}
		c.eq("loop limits", loopTops, []string{"(@limit - @ready)", "(@limit - @scheduled)"})
		c.eq("loop sums", adds, []string{"@ready", "@scheduled"})
	},
	sqlFindDedupe: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"SelectStatement"})
		c.eq("table references", tableRefs(stmts), []string{"jobs_dedupe AS d"})
		if q := selectOf(stmts[0]); q == nil || q.WhereClause == nil {
			c.errorf("want SELECT d.id ... WHERE ...")
		} else {
			c.eq("columns", sqlOfAll(q.SelectElements), []string{"d.id"})
			c.eq("key", conjuncts(q.WhereClause.SearchCondition), []string{"d.dedupe_key = @dedupe_key", "d.queue = @queue"})
		}
	},
}

// countStatementsSent runs CountQueues and a dedupe look-up on the fake
// database and returns what they sent.
func countStatementsSent(t *testing.T) []sentStmt {
	t.Helper()
	ctx := context.Background()
	q, _, f := newFakeQueue(t, Config{}, func(s sentStmt) fakeAnswer {
		switch s.name {
		case sqlQueueNames:
			return fakeAnswer{rows: [][]driver.Value{{"a", int64(0)}, {"b", int64(3)}, {"gone", int64(0)}}}
		case sqlCountQueue:
			if fmt.Sprint(s.args["queue"]) == "gone" {
				return fakeAnswer{rows: [][]driver.Value{{int64(0), int64(0), int64(0), int64(0), int64(0), false}}}
			}
			return fakeAnswer{rows: [][]driver.Value{{int64(1), int64(2), int64(3), int64(4), int64(1_500_000), true}}}
		case sqlFindDedupe:
			return fakeAnswer{rows: [][]driver.Value{{int64(3)}}}
		}
		return answerOK(s)
	})
	got, err := q.CountQueues(ctx, 10)
	if err != nil || len(got) != 2 || got[1] != (queue.QueueStats{Queue: "b", Ready: 1, Scheduled: 2, Held: 3, Dead: 4,
		OldestReadyAge: 1.5, Paused: true}) {
		t.Fatalf("CountQueues = %+v, %v", got, err)
	}
	if sent := f.named(sqlCountQueue); len(sent) != 3 || sent[0].args["limit"] != int64(10) ||
		sent[0].args["held"] != int64(0) || sent[1].args["held"] != int64(3) {
		t.Errorf("count_queue sent %+v", sent)
	}
	// find_dedupe answers job 3, jobs.sql jobs 3 and 4 of queue q with
	// key k (answerOK): the one found is kept.
	if jobs, err := q.Jobs(ctx, queue.JobFilter{Queue: "q", DedupeKey: "k"}); err != nil || len(jobs) != 1 || jobs[0].ID != 3 {
		t.Fatalf("Jobs by dedupe key = %v, %v", jobs, err)
	}
	if sent := f.named(sqlFindDedupe); len(sent) != 1 || sent[0].args["dedupe_key"] != "k" {
		t.Errorf("find_dedupe sent %+v", sent)
	}
	return f.statements()
}

func TestCountStatementsSent(t *testing.T) { countStatementsSent(t) }
