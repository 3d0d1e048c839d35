package mssql

// The specs of the Admin statements (see tsql_test.go for the checker).

import (
	"slices"
	"strings"
	"testing"

	"github.com/sqlc-dev/teesql/ast"
)

func init() {
	for name, spec := range adminSpecs {
		specs[name] = spec
	}
}

// idJoin checks the FROM of a statement over a list of ids:
// jobs AS j WITH (ROWLOCK, FORCESEEK) INNER JOIN (VALUES ...) AS l (id)
// ON j.id = l.id, which touches only the rows named.
func (c *checker) idJoin(what string, d dml) {
	c.table(what+" target", d.target, "alias j", "")
	if d.from == nil || len(d.from.TableReferences) != 1 {
		c.errorf("%s: want FROM one join", what)
		return
	}
	j, ok := d.from.TableReferences[0].(*ast.QualifiedJoin)
	if !ok || j.QualifiedJoinType != "Inner" {
		c.errorf("%s: FROM %T, want an inner join", what, d.from.TableReferences[0])
		return
	}
	c.table(what+" joined table", j.FirstTableReference, "jobs", "j", "rowlock", "forceseek")
	v, ok := j.SecondTableReference.(*ast.InlineDerivedTable)
	if !ok || v.Alias == nil || v.Alias.Value != "l" {
		c.errorf("%s: joined %T, want (VALUES ...) AS l", what, j.SecondTableReference)
		return
	}
	var cols []string
	for _, id := range v.Columns {
		cols = append(cols, id.Value)
	}
	c.eq(what+" VALUES columns", cols, []string{"id"})
	c.eq(what+" join condition", conjuncts(j.SearchCondition), []string{"j.id = l.id"})
}

// countBranches returns the columns of the two branches of q's FROM
// (SELECT ... FROM jobs GROUP BY ... UNION ALL SELECT ... FROM
// jobs_inflight GROUP BY ...) AS s, checking that each groups by the
// columns it starts with.
func countBranches(c *checker, what string, q *ast.QuerySpecification) (jobs, inflight []string) {
	if q == nil || q.FromClause == nil || len(q.FromClause.TableReferences) != 1 {
		c.errorf("%s: want FROM one derived table", what)
		return nil, nil
	}
	dt, ok := q.FromClause.TableReferences[0].(*ast.QueryDerivedTable)
	if !ok || dt.Alias == nil || dt.Alias.Value != "s" {
		c.errorf("%s: FROM %T, want (... UNION ALL ...) AS s", what, q.FromClause.TableReferences[0])
		return nil, nil
	}
	u, ok := dt.QueryExpression.(*ast.BinaryQueryExpression)
	if !ok || u.BinaryQueryExpressionType != "Union" || !u.All {
		c.errorf("%s: the derived table is not a UNION ALL", what)
		return nil, nil
	}
	var out [2][]string
	for i, b := range []struct {
		q     ast.QueryExpression
		table string
	}{{u.FirstQueryExpression, "jobs"}, {u.SecondQueryExpression, "jobs_inflight"}} {
		bq, ok := b.q.(*ast.QuerySpecification)
		if !ok || bq.FromClause == nil || len(bq.FromClause.TableReferences) != 1 || bq.GroupByClause == nil {
			c.errorf("%s: %s branch is not SELECT ... FROM one table GROUP BY ...", what, b.table)
			continue
		}
		c.table(what+" "+b.table+" branch", bq.FromClause.TableReferences[0], b.table, "")
		out[i] = sqlOfAll(bq.SelectElements)
		group := sqlOfAll(bq.GroupByClause.GroupingSpecifications)
		if len(group) > len(out[i]) || !slices.Equal(out[i][:len(group)], group) {
			c.errorf("%s: %s branch groups by %v but selects %v", what, b.table, group, out[i])
		}
	}
	return out[0], out[1]
}

// selectOf returns the query of a SELECT statement, or nil.
func selectOf(s ast.Statement) *ast.QuerySpecification {
	if sel, ok := s.(*ast.SelectStatement); ok {
		q, _ := sel.QueryExpression.(*ast.QuerySpecification)
		return q
	}
	return nil
}

// revive is what RetryDead sets: ready now, attempt 0; last_error is kept,
// so it is not set.
var revive = []string{"state = 'ready'", "attempt = 0", "run_at = SYSUTCDATETIME()"}

// listColumns are the columns Jobs scans, in order.
var listColumns = []string{"j.id", "j.queue", "j.kind", "j.payload", "j.priority", "j.run_at", "j.attempt", "j.max_attempts",
	"j.state", "j.claim_token", "j.claimed_until", "j.last_error", "j.dedupe_key", "j.created_at"}

var adminSpecs = map[string]func(c *checker, stmts []ast.Statement){
	sqlEnqueueUnique: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"PredicateSetStatement", "DeclareVariableStatement",
			"DeclareTableVariableStatement", "SelectStatement", "IfStatement"})
		// It runs in the caller's transaction: no XACT_ABORT, which would
		// make any error end that transaction, and no transaction of its own.
		if n := len(find[*ast.BeginTransactionStatement](stmts)) + len(find[*ast.CommitTransactionStatement](stmts)); n != 0 {
			c.errorf("a transaction of its own (%d statements)", n)
		}
		for _, p := range find[*ast.PredicateSetStatement](stmts) {
			if p.Options != "NoCount" {
				c.errorf("SET %s", p.Options)
			}
		}
		c.eq("table references", tableRefs(stmts), []string{"jobs", "jobs_dedupe", "jobs_dedupe AS d WITH (holdlock, rowlock, updlock)"})
		if len(stmts) != 5 {
			return
		}
		// The key, read under a lock held to the end of the transaction.
		look := selectOf(stmts[3])
		if look == nil || look.FromClause == nil || len(look.FromClause.TableReferences) != 1 || look.WhereClause == nil {
			c.errorf("the key's look-up is not SELECT @existing = ... FROM one table WHERE ...")
			return
		}
		c.eq("look-up", sqlOfAll(look.SelectElements), []string{"@existing = d.id"})
		c.table("look-up table", look.FromClause.TableReferences[0], "jobs_dedupe", "d", "updlock", "holdlock", "rowlock")
		c.eq("look-up key", conjuncts(look.WhereClause.SearchCondition), []string{"d.dedupe_key = @dedupe_key", "d.queue = @queue"})

		ifs := stmts[4].(*ast.IfStatement)
		c.eq("IF", sqlOf(ifs.Predicate), "@existing IS NULL")
		if q := selectOf(ifs.ElseStatement); q == nil {
			c.errorf("ELSE is not SELECT @existing, 1")
		} else {
			c.eq("existing", sqlOfAll(q.SelectElements), []string{"@existing", "CAST(1 AS BIT)"})
		}
		block, ok := ifs.ThenStatement.(*ast.BeginEndBlockStatement)
		if !ok || block.StatementList == nil {
			c.errorf("IF ... THEN is not a BEGIN ... END block")
			return
		}
		body := block.StatementList.Statements
		c.eq("insert", kinds(body), []string{"InsertStatement", "InsertStatement", "SelectStatement"})
		if len(body) != 3 {
			return
		}
		ins, _ := dmlOf(body[0])
		c.table("INSERT target", ins.target, "jobs", "")
		cols, _ := columns()
		names := sqlOfAll(ins.insert.Columns)
		for _, col := range names {
			if !slices.Contains(cols["jobs"], col) {
				c.errorf("INSERT names %s, not a column of jobs", col)
			}
		}
		src, ok := ins.insert.InsertSource.(*ast.ValuesInsertSource)
		if !ok || len(src.RowValues) != 1 || len(src.RowValues[0].ColumnValues) != len(names) {
			c.errorf("INSERT source is not one VALUES row as wide as its columns")
			return
		}
		vals := map[string]string{}
		for i, col := range names {
			vals[col] = sqlOf(src.RowValues[0].ColumnValues[i])
		}
		for col, want := range map[string]string{
			"id": "NEXT VALUE FOR " + testNames.Prefix + "jobs_id_seq", "queue": "@queue", "kind": "@kind", "payload": "@payload",
			"priority": "@priority", "attempt": "0", "max_attempts": "@max_attempts", "state": "'ready'",
			"dedupe_key": "@dedupe_key", "created_at": "SYSUTCDATETIME()",
			"run_at": "CASE WHEN @run_at IS NULL" +
				" THEN DATEADD(millisecond, @delay_ms, DATEADD(second, @delay_s, SYSUTCDATETIME()))" +
				" ELSE CONVERT(DATETIME2(6), SWITCHOFFSET(@run_at, '+00:00')) END",
		} {
			c.eq("INSERT value of "+col, vals[col], want)
		}
		if ins.into == nil {
			c.errorf("INSERT has no OUTPUT INTO @ids")
		} else {
			c.eq("OUTPUT INTO", sqlOfAll(ins.into.SelectColumns), []string{"inserted.id"})
		}
		keys, _ := dmlOf(body[1])
		c.table("dedupe INSERT target", keys.target, "jobs_dedupe", "")
		c.eq("dedupe INSERT columns", sqlOfAll(keys.insert.Columns), []string{"queue", "dedupe_key", "id"})
		if src, ok := keys.insert.InsertSource.(*ast.SelectInsertSource); !ok {
			c.errorf("dedupe INSERT source is not a SELECT")
		} else if q, ok := src.Select.(*ast.QuerySpecification); ok {
			c.eq("dedupe INSERT values", sqlOfAll(q.SelectElements), []string{"@queue", "@dedupe_key", "id"})
		}
		if q := selectOf(body[2]); q != nil {
			c.eq("inserted", sqlOfAll(q.SelectElements), []string{"id", "CAST(0 AS BIT)"})
		}
	},
	sqlJobs: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"SelectStatement"})
		c.eq("table references", tableRefs(stmts), []string{"jobs", "jobs_inflight"})
		if len(stmts) != 1 {
			return
		}
		sel := stmts[0].(*ast.SelectStatement)
		var hints []string
		for _, h := range sel.OptimizerHints {
			if o, ok := h.(*ast.OptimizerHint); ok {
				hints = append(hints, o.HintKind)
			}
		}
		c.eq("OPTION", hints, []string{"Recompile"})
		q := selectOf(sel)
		if q == nil {
			c.errorf("not a plain SELECT")
			return
		}
		c.top("list", q.TopRowFilter, "@limit")
		c.eq("columns", sqlOfAll(q.SelectElements), listColumns)
		if q.WhereClause == nil {
			c.errorf("no WHERE")
		} else {
			c.eq("filters", conjuncts(q.WhereClause.SearchCondition), []string{
				"(@kind = '' OR j.kind = @kind)", "(@queue = '' OR j.queue = @queue)", "(@state = '' OR j.state = @state)",
				"j.id > @after"})
		}
		if q.OrderByClause == nil {
			c.errorf("no ORDER BY: TOP would take an arbitrary page")
		} else {
			c.eq("order", sqlOfAll(q.OrderByClause.OrderByElements), []string{"j.id"})
		}
		if q.FromClause == nil || len(q.FromClause.TableReferences) != 1 {
			c.errorf("want FROM one derived table")
			return
		}
		dt, ok := q.FromClause.TableReferences[0].(*ast.QueryDerivedTable)
		if !ok || dt.Alias == nil || dt.Alias.Value != "j" {
			c.errorf("FROM %T, want (... UNION ALL ...) AS j", q.FromClause.TableReferences[0])
			return
		}
		u, ok := dt.QueryExpression.(*ast.BinaryQueryExpression)
		if !ok || u.BinaryQueryExpressionType != "Union" || !u.All {
			c.errorf("the derived table is not a UNION ALL")
			return
		}
		// Both tables, every column in scan order: jobs has no lease,
		// jobs_inflight no state (every row there is held).
		for _, b := range []struct {
			q            ast.QueryExpression
			table        string
			state, token string
			until        string
		}{
			{u.FirstQueryExpression, "jobs", "state", "CAST(NULL AS BIGINT)", "CAST(NULL AS DATETIME2(6))"},
			{u.SecondQueryExpression, "jobs_inflight", "'claimed'", "claim_token", "claimed_until"},
		} {
			bq, ok := b.q.(*ast.QuerySpecification)
			if !ok || bq.FromClause == nil || len(bq.FromClause.TableReferences) != 1 {
				c.errorf("%s branch: want SELECT ... FROM one table", b.table)
				continue
			}
			c.table(b.table+" branch", bq.FromClause.TableReferences[0], b.table, "")
			c.eq(b.table+" branch columns", sqlOfAll(bq.SelectElements), []string{"id", "queue", "kind", "payload", "priority",
				"run_at", "attempt", "max_attempts", b.state, b.token, b.until, "last_error", "dedupe_key", "created_at"})
			if bq.WhereClause != nil {
				c.errorf("%s branch filters on its own", b.table)
			}
		}
	},
	sqlCancel: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"PredicateSetStatement", "PredicateSetStatement",
			"DeclareTableVariableStatement", "BeginTransactionStatement", "DeleteStatement", "DeleteStatement",
			"CommitTransactionStatement", "SelectStatement"})
		// Held jobs are in jobs_inflight: not touched.
		c.eq("table references", tableRefs(stmts), []string{"alias d", "alias j",
			"jobs AS j WITH (forceseek, rowlock)", "jobs_dedupe AS d WITH (forceseek, rowlock)"})
		if len(stmts) != 8 {
			return
		}
		c.setOn(stmts[:2], "NoCount", "XactAbort")
		del, _ := dmlOf(stmts[4])
		c.idJoin("cancel", del)
		if del.where != nil {
			c.errorf("cancel: unexpected WHERE %s", sqlOf(del.where.SearchCondition))
		}
		if del.into == nil || isNil(del.into.IntoTable) {
			c.errorf("cancel: want OUTPUT ... INTO @done")
		} else if v, ok := del.into.IntoTable.(*ast.VariableTableReference); !ok || sqlOf(v.Variable) != "@done" {
			c.errorf("cancel: OUTPUT INTO %T, want @done", del.into.IntoTable)
		} else {
			c.eq("cancel OUTPUT INTO", sqlOfAll(del.into.SelectColumns), []string{"deleted.id", "deleted.queue", "deleted.dedupe_key"})
		}
		keys, _ := dmlOf(stmts[5])
		c.table("dedupe target", keys.target, "alias d", "")
		if j := find[*ast.QualifiedJoin](keys.from); len(j) != 1 {
			c.errorf("dedupe delete: want one join")
		} else {
			c.table("dedupe table", j[0].FirstTableReference, "jobs_dedupe", "d", "rowlock", "forceseek")
			c.eq("dedupe join", conjuncts(j[0].SearchCondition), []string{"d.dedupe_key = x.dedupe_key", "d.id = x.id", "d.queue = x.queue"})
		}
		if q := selectOf(stmts[7]); q != nil {
			c.eq("result", sqlOfAll(q.SelectElements), []string{"id"})
		}
	},
	sqlRetryDeadIDs: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"UpdateStatement"})
		c.eq("table references", tableRefs(stmts), []string{"alias j", "jobs AS j WITH (forceseek, rowlock)"})
		d, _ := dmlOf(stmts[0])
		c.idJoin("retry dead", d)
		c.eq("SET", sqlOfAll(d.set), revive)
		if d.where == nil {
			c.errorf("no WHERE: it would revive live jobs and other queues' jobs")
		} else {
			c.eq("WHERE", conjuncts(d.where.SearchCondition), []string{"j.queue = @queue", "j.state = 'dead'"})
		}
		if d.out == nil {
			c.errorf("no OUTPUT of the ids revived")
		} else {
			c.eq("OUTPUT", sqlOfAll(d.out.SelectColumns), []string{"inserted.id"})
		}
	},
	sqlRetryDeadAll: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"UpdateStatement"})
		c.eq("table references", tableRefs(stmts), []string{"jobs WITH (rowlock)"})
		d, _ := dmlOf(stmts[0])
		c.top("UPDATE", d.top, "@batch")
		c.table("UPDATE target", d.target, "jobs", "", "rowlock")
		c.eq("SET", sqlOfAll(d.set), revive)
		if d.where == nil {
			c.errorf("no WHERE: it would revive every job")
		} else {
			c.eq("WHERE", conjuncts(d.where.SearchCondition), []string{"queue = @queue", "state = 'dead'"})
		}
		if d.out == nil {
			c.errorf("no OUTPUT of the ids revived")
		} else {
			c.eq("OUTPUT", sqlOfAll(d.out.SelectColumns), []string{"inserted.id"})
		}
	},
	sqlSetPaused: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"PredicateSetStatement", "PredicateSetStatement",
			"BeginTransactionStatement", "UpdateStatement", "IfStatement", "CommitTransactionStatement"})
		c.eq("table references", tableRefs(stmts), []string{"queues", "queues WITH (holdlock, updlock)"})
		if len(stmts) != 6 {
			return
		}
		c.setOn(stmts[:2], "NoCount", "XactAbort")
		up, _ := dmlOf(stmts[3])
		c.table("UPDATE target", up.target, "queues", "", "updlock", "holdlock")
		c.eq("SET", sqlOfAll(up.set), []string{"paused = @paused", "updated_at = SYSUTCDATETIME()"})
		if up.where == nil {
			c.errorf("UPDATE without WHERE")
		} else {
			c.eq("WHERE", conjuncts(up.where.SearchCondition), []string{"queue = @queue"})
		}
		ifs := stmts[4].(*ast.IfStatement)
		c.eq("IF", sqlOf(ifs.Predicate), "@@ROWCOUNT = 0")
		ins, ok := dmlOf(ifs.ThenStatement)
		if !ok || ins.insert == nil {
			c.errorf("IF ... THEN is not an INSERT")
			return
		}
		c.table("INSERT target", ins.target, "queues", "")
		c.eq("INSERT columns", sqlOfAll(ins.insert.Columns), []string{"queue", "paused", "updated_at"})
		if src, ok := ins.insert.InsertSource.(*ast.ValuesInsertSource); !ok || len(src.RowValues) != 1 {
			c.errorf("INSERT source is not one VALUES row")
		} else {
			c.eq("INSERT values", sqlOfAll(src.RowValues[0].ColumnValues), []string{"@queue", "@paused", "SYSUTCDATETIME()"})
		}
	},
	sqlStatsByKind: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"SelectStatement"})
		c.eq("table references", tableRefs(stmts), []string{"jobs", "jobs_inflight"})
		q := selectOf(stmts[0])
		if q == nil || q.GroupByClause == nil || q.OrderByClause == nil {
			c.errorf("want SELECT ... GROUP BY ... ORDER BY")
			return
		}
		c.eq("columns", sqlOfAll(q.SelectElements), []string{"s.queue", "s.kind",
			"SUM(s.ready)", "SUM(s.scheduled)", "SUM(s.held)", "SUM(s.dead)"})
		c.eq("group", sqlOfAll(q.GroupByClause.GroupingSpecifications), []string{"s.queue", "s.kind"})
		c.eq("order", sqlOfAll(q.OrderByClause.OrderByElements), []string{"s.queue", "s.kind"})
		// Each branch counts as stats.sql does per queue, grouped by kind
		// too: the same ready, scheduled, held and dead.
		jobs, inflight := countBranches(c, "stats_by_kind", q)
		base, err := renderStatements(testNames)
		if err != nil {
			c.errorf("render stats: %v", err)
			return
		}
		sstmts, err := parseBatch(base.text(sqlStats))
		if err != nil || len(sstmts) != 1 {
			c.errorf("stats does not parse: %v", err)
			return
		}
		sjobs, sinflight := countBranches(c, "stats", selectOf(sstmts[0]))
		if len(jobs) != 6 || len(inflight) != 6 || len(sjobs) != 6 || len(sinflight) != 6 {
			c.errorf("branches of %d, %d columns, want queue, kind and four counts; stats' of %d, %d",
				len(jobs), len(inflight), len(sjobs), len(sinflight))
			return
		}
		c.eq("jobs branch keys", jobs[:2], []string{"queue", "kind"})
		c.eq("jobs_inflight branch keys", inflight[:2], []string{"queue", "kind"})
		c.eq("jobs branch counts, as stats.sql's", jobs[2:], sjobs[1:5])
		c.eq("jobs_inflight branch counts, as stats.sql's", inflight[2:], sinflight[1:5])
	},
	sqlPaused: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"SelectStatement"})
		c.eq("table references", tableRefs(stmts), []string{"queues"})
		q := selectOf(stmts[0])
		if q == nil || q.WhereClause == nil || q.OrderByClause == nil {
			c.errorf("want SELECT queue ... WHERE ... ORDER BY queue")
			return
		}
		c.eq("columns", sqlOfAll(q.SelectElements), []string{"queue"})
		c.eq("WHERE", conjuncts(q.WhereClause.SearchCondition), []string{"paused = 1"})
		c.eq("order", sqlOfAll(q.OrderByClause.OrderByElements), []string{"queue"})
	},
}

// The checker rejects Admin, pause, snooze and rescue statements that
// parse but lack what they depend on.
func TestCheckerRejectsAdmin(t *testing.T) {
	stmts, err := renderStatements(testNames)
	if err != nil {
		t.Fatal(err)
	}
	base := func(name string) string { return exampleRows(stmts, name, 2) }
	edit := func(name, old, new string) string {
		t.Helper()
		if !strings.Contains(base(name), old) {
			t.Fatalf("%s has no %q; fix the test", name, old)
		}
		return strings.Replace(base(name), old, new, 1)
	}
	pausedCheck := "\n              AND NOT EXISTS (SELECT 1 FROM [s1].[pfx_queues] AS p\n                              WHERE p.queue = @queue AND p.paused = 1)"
	for _, tc := range []struct{ name, stmt, text string }{
		{"claim that ignores pause", sqlClaim, edit(sqlClaim, pausedCheck, "")},
		{"claim that checks another queue's pause", sqlClaim, edit(sqlClaim, "p.queue = @queue", "p.queue = queue")},
		{"UpdLock claim that ignores pause", sqlClaimUpdLock, edit(sqlClaimUpdLock, "AND p.paused = 1", "AND p.paused = 0")},
		{"snooze that spends an attempt", sqlRetry, edit(sqlRetry, "THEN deleted.attempt ELSE", "THEN deleted.attempt + 1 ELSE")},
		{"snooze that overwrites last_error", sqlRetry, edit(sqlRetry, "THEN deleted.last_error ELSE", "THEN l.error ELSE")},
		{"snooze that can make a job dead", sqlRetry, edit(sqlRetry, "CASE WHEN l.snooze = 1 THEN 'ready'\n            WHEN", "CASE WHEN")},
		{"rescue that waits for the lock", sqlRescue, edit(sqlRescue, "@LockTimeout = 0", "@LockTimeout = 5000")},
		{"rescue lock owned by nothing that ends", sqlRescue, edit(sqlRescue, "@LockOwner = 'Transaction'", "@LockOwner = 'Session'")},
		{"rescue lock with a spliced name", sqlRescue, edit(sqlRescue, "@Resource = @lock_resource", "@Resource = 'dbq'")},
		{"rescue that runs without the lock", sqlRescue, edit(sqlRescue, "IF @granted >= 0", "IF @granted >= -1")},
		{"rescue outside a transaction", sqlRescue, edit(sqlRescue, "BEGIN TRANSACTION;", "")},
		{"unique enqueue without HOLDLOCK", sqlEnqueueUnique, edit(sqlEnqueueUnique, "UPDLOCK, HOLDLOCK, ROWLOCK", "UPDLOCK, ROWLOCK")},
		{"unique enqueue that can abort the caller's transaction", sqlEnqueueUnique, edit(sqlEnqueueUnique, "SET NOCOUNT ON;", "SET NOCOUNT ON;\nSET XACT_ABORT ON;")},
		{"unique enqueue that checks another queue", sqlEnqueueUnique, edit(sqlEnqueueUnique, "d.queue = @queue", "d.queue = d.queue")},
		{"unique enqueue that drops the kind", sqlEnqueueUnique, edit(sqlEnqueueUnique, "@queue, @kind, @payload", "@queue, N'', @payload")},
		{"unique enqueue that records no key", sqlEnqueueUnique, edit(sqlEnqueueUnique, "SELECT @queue, @dedupe_key, id FROM @ids", "SELECT @queue, @dedupe_key, 0 FROM @ids")},
		{"cancel of held jobs", sqlCancel, edit(sqlCancel, "[s1].[pfx_jobs] AS j", "[s1].[pfx_jobs_inflight] AS j")},
		{"cancel that leaves dedupe keys taken", sqlCancel, edit(sqlCancel, "d.id = x.id", "d.id = 0")},
		{"revival of another queue's jobs", sqlRetryDeadIDs, edit(sqlRetryDeadIDs, "j.queue = @queue AND ", "")},
		{"revival that spends the attempt count", sqlRetryDeadAll, edit(sqlRetryDeadAll, "attempt = 0", "attempt = attempt")},
		{"unbounded revival", sqlRetryDeadAll, edit(sqlRetryDeadAll, "UPDATE TOP (@batch)", "UPDATE")},
		{"pause upsert that can insert twice", sqlSetPaused, edit(sqlSetPaused, "WITH (UPDLOCK, HOLDLOCK)", "WITH (UPDLOCK)")},
		{"list without order", sqlJobs, edit(sqlJobs, "ORDER BY j.id", "")},
		{"list without held jobs", sqlJobs, edit(sqlJobs, "[s1].[pfx_jobs_inflight]", "[s1].[pfx_jobs]")},
		{"list with a spliced queue", sqlJobs, edit(sqlJobs, "j.queue = @queue", "j.queue = 'q'")},
		{"list that ignores the kind filter", sqlJobs, edit(sqlJobs, "(@kind = '' OR j.kind = @kind)", "(@kind = @kind)")},
		{"list without kinds", sqlJobs, edit(sqlJobs, "j.queue, j.kind, j.payload", "j.queue, j.payload")},
		{"stats by kind with held jobs as ready", sqlStatsByKind, edit(sqlStatsByKind, "SELECT queue, kind, 0, 0, COUNT_BIG(*), 0", "SELECT queue, kind, COUNT_BIG(*), 0, 0, 0")},
		{"stats by kind that counts ready jobs not yet due", sqlStatsByKind, edit(sqlStatsByKind, "state = 'ready' AND run_at <= SYSUTCDATETIME() THEN 1", "state = 'ready' THEN 1")},
		{"stats by kind per queue only", sqlStatsByKind, edit(sqlStatsByKind, "GROUP BY s.queue, s.kind", "GROUP BY s.queue")},
		{"stats by kind without held jobs", sqlStatsByKind, edit(sqlStatsByKind, "[s1].[pfx_jobs_inflight]", "[s1].[pfx_jobs]")},
		{"stats without pause", sqlStats, edit(sqlStats, "p.paused = 1", "p.paused = p.paused")},
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
	// The parameter check knows declared variables and a procedure's
	// parameter names from bind parameters.
	rescue := base(sqlRescue)
	args := map[string]any{"lock_resource": "r", "batch": 1, "error": "e"}
	if err := checkSQL(sqlRescue, rescue, args); err != nil {
		t.Fatalf("rescue with its arguments: %v", err)
	}
	delete(args, "lock_resource")
	if err := checkSQL(sqlRescue, rescue, args); err == nil {
		t.Error("rescue without @lock_resource accepted")
	}
}
