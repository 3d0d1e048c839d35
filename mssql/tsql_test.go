package mssql

// A checker for the dialect's T-SQL that needs no server: the statement is
// parsed with github.com/sqlc-dev/teesql (a port of Microsoft's ScriptDom)
// and its tree compared with what the statement must be. The parser is
// lenient — it accepts DELETE TOP 1 and silently drops an unknown hint — so
// parsing alone proves nothing: every property that matters is asserted on
// the tree, and TestCheckerRejects shows each assertion failing on a
// statement that lacks it.

import (
	"context"
	"fmt"
	"io/fs"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/migrations"
	"github.com/sqlc-dev/teesql/ast"
	"github.com/sqlc-dev/teesql/parser"
)

// testNames are the names statements are rendered with in these tests: a
// schema and a prefix, so a reference that skips either shows.
var testNames = dialect.Names{Schema: "s1", Prefix: "pfx_"}

// parseBatch parses text, which must be one batch.
func parseBatch(text string) ([]ast.Statement, error) {
	s, err := parser.Parse(context.Background(), strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	if len(s.Batches) != 1 {
		return nil, fmt.Errorf("%d batches, want 1", len(s.Batches))
	}
	return s.Batches[0].Statements, nil
}

// find returns every node of type T under root, depth first.
func find[T any](root any) []T {
	var out []T
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Pointer:
			if v.IsNil() {
				return
			}
			if t, ok := v.Interface().(T); ok {
				out = append(out, t)
			}
			walk(v.Elem())
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		}
	}
	walk(reflect.ValueOf(root))
	return out
}

func isNil(n any) bool {
	if n == nil {
		return true
	}
	v := reflect.ValueOf(n)
	return (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil()
}

var (
	comparisonOps = map[string]string{"Equals": "=", "LessThan": "<", "LessThanOrEqualTo": "<=",
		"GreaterThan": ">", "GreaterThanOrEqualTo": ">=", "NotEqualToBrackets": "<>", "NotEqualToExclamation": "!="}
	arithmeticOps = map[string]string{"Add": "+", "Subtract": "-", "Multiply": "*", "Divide": "/"}
)

// sqlOf prints the expressions the dialect uses in one canonical form, so
// that checks read like SQL: "f.id = l.id", "deleted.attempt + 1".
func sqlOf(n any) string {
	if isNil(n) {
		return ""
	}
	switch n := n.(type) {
	case *ast.ColumnReferenceExpression:
		if n.MultiPartIdentifier == nil {
			return "*" // COUNT_BIG(*)
		}
		var parts []string
		for _, id := range n.MultiPartIdentifier.Identifiers {
			parts = append(parts, id.Value)
		}
		return strings.Join(parts, ".")
	case *ast.VariableReference:
		return n.Name
	case *ast.StringLiteral:
		return "'" + n.Value + "'"
	case *ast.IntegerLiteral:
		return n.Value
	case *ast.ParenthesisExpression:
		return "(" + sqlOf(n.Expression) + ")"
	case *ast.BooleanParenthesisExpression:
		return "(" + sqlOf(n.Expression) + ")"
	case *ast.FunctionCall:
		var args []string
		for _, a := range n.Parameters {
			args = append(args, sqlOf(a))
		}
		return strings.ToUpper(n.FunctionName.Value) + "(" + strings.Join(args, ", ") + ")"
	case *ast.BinaryExpression:
		return sqlOf(n.FirstExpression) + " " + arithmeticOps[n.BinaryExpressionType] + " " + sqlOf(n.SecondExpression)
	case *ast.BooleanComparisonExpression:
		return sqlOf(n.FirstExpression) + " " + comparisonOps[n.ComparisonType] + " " + sqlOf(n.SecondExpression)
	case *ast.BooleanBinaryExpression:
		return sqlOf(n.FirstExpression) + " " + strings.ToUpper(n.BinaryExpressionType) + " " + sqlOf(n.SecondExpression)
	case *ast.BooleanIsNullExpression:
		if n.IsNot {
			return sqlOf(n.Expression) + " IS NOT NULL"
		}
		return sqlOf(n.Expression) + " IS NULL"
	case *ast.BooleanInExpression:
		return sqlOf(n.Expression) + " IN (…)"
	case *ast.SearchedCaseExpression:
		var b strings.Builder
		b.WriteString("CASE")
		for _, w := range n.WhenClauses {
			b.WriteString(" WHEN " + sqlOf(w.WhenExpression) + " THEN " + sqlOf(w.ThenExpression))
		}
		if !isNil(n.ElseExpression) {
			b.WriteString(" ELSE " + sqlOf(n.ElseExpression))
		}
		return b.String() + " END"
	case *ast.SelectScalarExpression:
		return sqlOf(n.Expression)
	case *ast.SelectSetVariable:
		return sqlOf(n.Variable) + " = " + sqlOf(n.Expression)
	case *ast.BooleanNotExpression:
		return "NOT " + sqlOf(n.Expression)
	case *ast.ExistsPredicate:
		return "EXISTS (" + querySummary(n.Subquery) + ")"
	case *ast.NullLiteral:
		return "NULL"
	case *ast.UnaryExpression:
		return map[string]string{"Negative": "-", "Positive": "+", "BitwiseNot": "~"}[n.UnaryExpressionType] + sqlOf(n.Expression)
	case *ast.GlobalVariableExpression:
		return n.Name
	case *ast.CastCall:
		return "CAST(" + sqlOf(n.Parameter) + " AS " + typeName(n.DataType) + ")"
	case *ast.ConvertCall:
		return "CONVERT(" + typeName(n.DataType) + ", " + sqlOf(n.Parameter) + ")"
	case *ast.NextValueForExpression:
		return "NEXT VALUE FOR " + n.SequenceName.BaseIdentifier.Value
	case *ast.AssignmentSetClause:
		return sqlOf(n.Column) + " = " + sqlOf(n.NewValue)
	case *ast.ExpressionWithSortOrder:
		return sqlOf(n.Expression)
	case *ast.ExpressionGroupingSpecification:
		return sqlOf(n.Expression)
	}
	return fmt.Sprintf("<%T>", n)
}

// typeName prints a data type as T-SQL spells it: BIGINT, DATETIME2(6).
func typeName(t ast.DataTypeReference) string {
	d, ok := t.(*ast.SqlDataTypeReference)
	if !ok {
		return fmt.Sprintf("<%T>", t)
	}
	s := strings.ToUpper(d.SqlDataTypeOption)
	if len(d.Parameters) > 0 {
		s += "(" + strings.Join(sqlOfAll(d.Parameters), ", ") + ")"
	}
	return s
}

// querySummary prints a simple subquery in one canonical form:
// "SELECT 1 FROM queues AS p WHERE p.paused = 1 AND p.queue = @queue",
// its tables as tableRef prints them and its conditions sorted.
func querySummary(q ast.QueryExpression) string {
	spec, ok := q.(*ast.QuerySpecification)
	if !ok {
		return fmt.Sprintf("<%T>", q)
	}
	s := "SELECT " + strings.Join(sqlOfAll(spec.SelectElements), ", ")
	if spec.FromClause != nil {
		var from []string
		for _, r := range spec.FromClause.TableReferences {
			if n, ok := r.(*ast.NamedTableReference); ok {
				from = append(from, tableRef(n))
			} else {
				from = append(from, fmt.Sprintf("<%T>", r))
			}
		}
		s += " FROM " + strings.Join(from, ", ")
	}
	if spec.WhereClause != nil {
		s += " WHERE " + strings.Join(conjuncts(spec.WhereClause.SearchCondition), " AND ")
	}
	return s
}

func sqlOfAll[T any](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = sqlOf(x)
	}
	return out
}

// conjuncts splits a condition at its top-level ANDs, sorted.
func conjuncts(b ast.BooleanExpression) []string {
	var out []string
	var split func(b ast.BooleanExpression)
	split = func(b ast.BooleanExpression) {
		if and, ok := b.(*ast.BooleanBinaryExpression); ok && and.BinaryExpressionType == "And" {
			split(and.FirstExpression)
			split(and.SecondExpression)
			return
		}
		out = append(out, sqlOf(b))
	}
	if !isNil(b) {
		split(b)
	}
	sort.Strings(out)
	return out
}

func hintsOf(r *ast.NamedTableReference) []string {
	var out []string
	for _, h := range r.TableHints {
		out = append(out, strings.ToLower(reflect.ValueOf(h).Elem().FieldByName("HintKind").String()))
	}
	sort.Strings(out)
	return out
}

// tableRef describes a named table reference: "jobs AS f WITH (rowlock)"
// for one of the dialect's tables (its prefix removed), "alias f" for a
// reference to an alias or CTE.
func tableRef(r *ast.NamedTableReference) string {
	base := r.SchemaObject.BaseIdentifier.Value
	var s string
	if name, ok := strings.CutPrefix(base, testNames.Prefix); ok {
		s = name
		if schema := r.SchemaObject.SchemaIdentifier; schema == nil || schema.Value != testNames.Schema {
			s += " (not in schema " + testNames.Schema + ")"
		}
		if r.SchemaObject.BaseIdentifier.QuoteType != "SquareBracket" {
			s += " (unquoted)"
		}
	} else {
		s = "alias " + base
	}
	if r.Alias != nil {
		s += " AS " + r.Alias.Value
	}
	if h := hintsOf(r); len(h) > 0 {
		s += " WITH (" + strings.Join(h, ", ") + ")"
	}
	return s
}

// tableRefs lists every named table reference under root, sorted.
func tableRefs(root any) []string {
	var out []string
	for _, r := range find[*ast.NamedTableReference](root) {
		out = append(out, tableRef(r))
	}
	sort.Strings(out)
	return out
}

// checker collects what is wrong with one statement.
type checker struct {
	name string
	errs []string
}

func (c *checker) errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

// eq reports got != want under what.
func (c *checker) eq(what string, got, want any) {
	if !reflect.DeepEqual(got, want) {
		c.errorf("%s:\n\t got %q\n\twant %q", what, got, want)
	}
}

func (c *checker) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s", c.name, strings.Join(c.errs, "\n"))
}

// dml holds the parts of a DELETE, UPDATE or INSERT.
type dml struct {
	target ast.TableReference
	from   *ast.FromClause
	where  *ast.WhereClause
	top    *ast.TopRowFilter
	out    *ast.OutputClause
	into   *ast.OutputIntoClause
	ctes   *ast.WithCtesAndXmlNamespaces
	set    []ast.SetClause
	insert *ast.InsertSpecification
}

func dmlOf(s ast.Statement) (dml, bool) {
	switch s := s.(type) {
	case *ast.DeleteStatement:
		d := s.DeleteSpecification
		return dml{target: d.Target, from: d.FromClause, where: d.WhereClause, top: d.TopRowFilter,
			out: d.OutputClause, into: d.OutputIntoClause, ctes: s.WithCtesAndXmlNamespaces}, true
	case *ast.UpdateStatement:
		u := s.UpdateSpecification
		return dml{target: u.Target, from: u.FromClause, where: u.WhereClause, top: u.TopRowFilter,
			out: u.OutputClause, into: u.OutputIntoClause, ctes: s.WithCtesAndXmlNamespaces, set: u.SetClauses}, true
	case *ast.InsertStatement:
		i := s.InsertSpecification
		return dml{target: i.Target, top: i.TopRowFilter, out: i.OutputClause, into: i.OutputIntoClause,
			ctes: s.WithCtesAndXmlNamespaces, insert: i}, true
	}
	return dml{}, false
}

func kinds(stmts []ast.Statement) []string {
	out := make([]string, len(stmts))
	for i, s := range stmts {
		out[i] = strings.TrimPrefix(fmt.Sprintf("%T", s), "*ast.")
	}
	return out
}

// top checks a TOP clause: TOP (@v), parenthesized as DML requires, not
// PERCENT, not WITH TIES.
func (c *checker) top(what string, t *ast.TopRowFilter, v string) {
	if t == nil {
		c.errorf("%s: no TOP, want TOP (%s)", what, v)
		return
	}
	p, ok := t.Expression.(*ast.ParenthesisExpression)
	if !ok || t.Percent || t.WithTies {
		c.errorf("%s: TOP %s (percent %v, with ties %v), want TOP (%s)", what, sqlOf(t.Expression), t.Percent, t.WithTies, v)
		return
	}
	c.eq(what+" TOP", sqlOf(p.Expression), v)
}

// table checks that r is the dialect table name (prefix removed) with
// exactly hints (lower case, sorted) and alias.
func (c *checker) table(what string, r ast.TableReference, name, alias string, hints ...string) {
	n, ok := r.(*ast.NamedTableReference)
	if !ok {
		c.errorf("%s: a %T, want table %s", what, r, name)
		return
	}
	want := name
	if alias != "" {
		want += " AS " + alias
	}
	if len(hints) > 0 {
		sort.Strings(hints)
		want += " WITH (" + strings.Join(hints, ", ") + ")"
	}
	c.eq(what, tableRef(n), want)
}

// setOn checks that stmts are SET <option> ON statements for options, in
// order.
func (c *checker) setOn(stmts []ast.Statement, options ...string) {
	var got []string
	for _, s := range stmts {
		p, ok := s.(*ast.PredicateSetStatement)
		if !ok {
			got = append(got, fmt.Sprintf("<%T>", s))
			continue
		}
		if !p.IsOn {
			c.errorf("SET %s OFF, want ON", p.Options)
		}
		got = append(got, p.Options)
	}
	c.eq("SET options", got, options)
}

// applock checks that s is EXEC <ret> = sys.sp_getapplock with exactly
// the named arguments args (name → value as sqlOf prints it).
func (c *checker) applock(what string, s ast.Statement, ret string, args map[string]string) {
	e, ok := s.(*ast.ExecuteStatement)
	if !ok || e.ExecuteSpecification == nil {
		c.errorf("%s: a %T, want EXEC", what, s)
		return
	}
	spec := e.ExecuteSpecification
	c.eq(what+" return code into", sqlOf(spec.Variable), ret)
	p, ok := spec.ExecutableEntity.(*ast.ExecutableProcedureReference)
	if !ok || p.ProcedureReference == nil || p.ProcedureReference.ProcedureReference == nil {
		c.errorf("%s: not a procedure call", what)
		return
	}
	name := p.ProcedureReference.ProcedureReference.Name
	proc := strings.ToLower(name.BaseIdentifier.Value)
	if name.SchemaIdentifier != nil {
		proc = strings.ToLower(name.SchemaIdentifier.Value) + "." + proc
	}
	c.eq(what+" procedure", proc, "sys.sp_getapplock")
	got := map[string]string{}
	for _, a := range p.Parameters {
		if a.Variable == nil {
			c.errorf("%s: positional argument %s; name every one", what, sqlOf(a.ParameterValue))
			continue
		}
		got[a.Variable.Name] = sqlOf(a.ParameterValue)
	}
	c.eq(what+" arguments", got, args)
}

// columns are the columns of each table once every version of the
// migration is applied, in the order they were created or added.
var columns = sync.OnceValues(func() (map[string][]string, error) {
	fsys, err := migrations.FS(dialect.MSSQL, testNames)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	err = fs.WalkDir(fsys, ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		up, _, _ := strings.Cut(string(b), "-- +goose Down")
		if !hasStatement(up) {
			return nil // a version with nothing to change here
		}
		stmts, err := parseBatch(up)
		if err != nil {
			return err
		}
		for _, s := range stmts {
			switch s := s.(type) {
			case *ast.CreateTableStatement:
				name := strings.TrimPrefix(s.SchemaObjectName.BaseIdentifier.Value, testNames.Prefix)
				out[name] = nil
				for _, col := range s.Definition.ColumnDefinitions {
					out[name] = append(out[name], col.ColumnIdentifier.Value)
				}
			case *ast.AlterTableAddTableElementStatement:
				name := strings.TrimPrefix(s.SchemaObjectName.BaseIdentifier.Value, testNames.Prefix)
				if _, ok := out[name]; !ok {
					return fmt.Errorf("%s: adds to %s, which no earlier version creates", p, name)
				}
				for _, col := range s.Definition.ColumnDefinitions {
					out[name] = append(out[name], col.ColumnIdentifier.Value)
				}
			}
		}
		return nil
	})
	return out, err
})

// moves checks an OUTPUT INTO that writes a moved row into table: it names
// every column of the table (nothing is lost in the move), and each value
// is deleted.<the same column> unless set gives its expression.
func (c *checker) moves(what string, into *ast.OutputIntoClause, table string, set map[string]string) {
	if into == nil {
		c.errorf("%s: no OUTPUT ... INTO %s", what, table)
		return
	}
	c.table(what+" INTO", into.IntoTable, table, "")
	cols, err := columns()
	if err != nil {
		c.errorf("migration: %v", err)
		return
	}
	into2 := sqlOfAll(into.IntoTableColumns)
	c.eq(what+" INTO columns (sorted)", sorted(into2), sorted(cols[table]))
	vals := sqlOfAll(into.SelectColumns)
	if len(vals) != len(into2) {
		c.errorf("%s: %d values for %d columns", what, len(vals), len(into2))
		return
	}
	for i, col := range into2 {
		want, ok := set[col]
		if !ok {
			want = "deleted." + col
		}
		c.eq(fmt.Sprintf("%s value for %s", what, col), vals[i], want)
	}
	for col := range set {
		if !slices.Contains(into2, col) {
			c.errorf("%s: sets %s, which it does not write", what, col)
		}
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// leaseJoin checks the FROM of a statement over a list of leases:
// jobs_inflight AS f WITH (ROWLOCK) INNER JOIN (VALUES ...) AS l (cols)
// ON f.id = l.id AND f.claim_token = l.token — the token match is what
// fences a holder whose lease was lost.
func (c *checker) leaseJoin(what string, d dml, cols ...string) {
	c.table(what+" target", d.target, "alias f", "")
	if d.from == nil || len(d.from.TableReferences) != 1 {
		c.errorf("%s: want FROM one join", what)
		return
	}
	j, ok := d.from.TableReferences[0].(*ast.QualifiedJoin)
	if !ok || j.QualifiedJoinType != "Inner" {
		c.errorf("%s: FROM %T, want an inner join", what, d.from.TableReferences[0])
		return
	}
	c.table(what+" joined table", j.FirstTableReference, "jobs_inflight", "f", "rowlock", "forceseek")
	v, ok := j.SecondTableReference.(*ast.InlineDerivedTable)
	if !ok || v.Alias == nil || v.Alias.Value != "l" {
		c.errorf("%s: joined %T, want (VALUES ...) AS l", what, j.SecondTableReference)
		return
	}
	var got []string
	for _, id := range v.Columns {
		got = append(got, id.Value)
	}
	c.eq(what+" VALUES columns", got, cols)
	c.eq(what+" join condition", conjuncts(j.SearchCondition), []string{"f.claim_token = l.token", "f.id = l.id"})
	if d.where != nil {
		c.errorf("%s: unexpected WHERE %s", what, sqlOf(d.where.SearchCondition))
	}
}

const leaseExpr = "DATEADD(millisecond, @lease_ms, DATEADD(second, @lease_s, SYSUTCDATETIME()))"

// claimOutput is what a claim returns, in the order scanClaim reads it.
var claimOutput = []string{"deleted.id", "deleted.queue", "deleted.kind", "deleted.payload", "deleted.priority", "deleted.run_at",
	"deleted.attempt", "deleted.max_attempts", "deleted.last_error", "deleted.dedupe_key", "deleted.created_at", leaseExpr}

// notPaused is the claim's check that its queue is not paused: one probe
// of the queues table's primary key, by the bound queue name.
const notPaused = "NOT EXISTS (SELECT 1 FROM queues AS p WHERE p.paused = 1 AND p.queue = @queue)"

// readyPredicate is the claimable-job condition of the claim's read
// (sorted, as conjuncts returns it).
var readyPredicate = []string{notPaused, "queue = @queue", "run_at <= SYSUTCDATETIME()", "state = 'ready'"}

// specs says what each statement must be.
var specs = map[string]func(c *checker, stmts []ast.Statement){
	sqlClaim: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"DeleteStatement"})
		d, _ := dmlOf(stmts[0])
		// Every reference carries its own hints: the DELETE fails at once
		// on a locked row and finds its rows by seeking, the inner read
		// skips locked rows.
		c.eq("table references", tableRefs(stmts[0]), []string{
			"alias j", "jobs AS j WITH (forceseek, nowait, rowlock)", "jobs WITH (readcommittedlock, readpast)", "jobs_inflight",
			"queues AS p"})
		c.top("DELETE", d.top, "@n")
		c.table("DELETE target", d.target, "alias j", "")
		if d.from == nil || len(d.from.TableReferences) != 1 {
			c.errorf("want FROM jobs AS j WITH (...)")
		} else {
			c.table("DELETE FROM", d.from.TableReferences[0], "jobs", "j", "nowait", "rowlock", "forceseek")
		}
		c.moves("claim", d.into, "jobs_inflight", map[string]string{"claim_token": "@token", "claimed_until": leaseExpr})
		if d.out == nil {
			c.errorf("no OUTPUT to the client")
		} else {
			c.eq("OUTPUT", sqlOfAll(d.out.SelectColumns), claimOutput)
		}
		if d.where == nil {
			c.errorf("no WHERE")
			return
		}
		c.eq("WHERE", conjuncts(d.where.SearchCondition), []string{"j.id IN (…)", "j.run_at <= SYSUTCDATETIME()", "j.state = 'ready'"})
		in := find[*ast.BooleanInExpression](d.where)
		if len(in) != 1 || sqlOf(in[0].Expression) != "j.id" {
			c.errorf("want one j.id IN (...), got %d", len(in))
			return
		}
		pick, ok := in[0].Subquery.(*ast.QuerySpecification)
		if !ok {
			c.errorf("IN (%T), want a subquery", in[0].Subquery)
			return
		}
		c.top("random pick", pick.TopRowFilter, "@n")
		c.eq("random pick columns", sqlOfAll(pick.SelectElements), []string{"r.id"})
		if pick.OrderByClause == nil {
			c.errorf("random pick has no ORDER BY")
		} else {
			c.eq("random pick order", sqlOfAll(pick.OrderByClause.OrderByElements), []string{"CHECKSUM(NEWID())"})
		}
		if pick.FromClause == nil || len(pick.FromClause.TableReferences) != 1 {
			c.errorf("random pick: want FROM one derived table")
			return
		}
		r, ok := pick.FromClause.TableReferences[0].(*ast.QueryDerivedTable)
		if !ok || r.Alias == nil || r.Alias.Value != "r" {
			c.errorf("random pick FROM %T, want (SELECT TOP (@window) ...) AS r", pick.FromClause.TableReferences[0])
			return
		}
		window, ok := r.QueryExpression.(*ast.QuerySpecification)
		if !ok {
			c.errorf("window is a %T", r.QueryExpression)
			return
		}
		c.top("window", window.TopRowFilter, "@window")
		c.eq("window columns", sqlOfAll(window.SelectElements), []string{"id"})
		if window.FromClause == nil || len(window.FromClause.TableReferences) != 1 {
			c.errorf("window: want FROM one table")
		} else {
			c.table("window table", window.FromClause.TableReferences[0], "jobs", "", "readpast", "readcommittedlock")
		}
		if window.WhereClause == nil {
			c.errorf("window has no WHERE")
		} else {
			c.eq("window WHERE", conjuncts(window.WhereClause.SearchCondition), readyPredicate)
		}
		if window.OrderByClause == nil {
			c.errorf("window has no ORDER BY: TOP would take an arbitrary set")
		} else {
			c.eq("window order", sqlOfAll(window.OrderByClause.OrderByElements), []string{"priority", "run_at", "id"})
		}
	},
	sqlClaimUpdLock: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"DeleteStatement"})
		d, _ := dmlOf(stmts[0])
		c.eq("table references", tableRefs(stmts[0]), []string{
			"alias picked", "jobs WITH (readcommittedlock, readpast, rowlock, updlock)", "jobs_inflight", "queues AS p"})
		c.table("DELETE target", d.target, "alias picked", "")
		if d.ctes == nil || len(d.ctes.CommonTableExpressions) != 1 || d.ctes.CommonTableExpressions[0].ExpressionName.Value != "picked" {
			c.errorf("want WITH picked AS (...)")
			return
		}
		q, ok := d.ctes.CommonTableExpressions[0].QueryExpression.(*ast.QuerySpecification)
		if !ok {
			c.errorf("CTE is a %T", d.ctes.CommonTableExpressions[0].QueryExpression)
			return
		}
		c.top("CTE", q.TopRowFilter, "@n")
		// OUTPUT reads deleted.* of the CTE: it must carry every column
		// the move writes (all of jobs but state, which jobs_inflight lacks).
		if cols, err := columns(); err == nil {
			want := slices.DeleteFunc(slices.Clone(cols["jobs"]), func(c string) bool { return c == "state" })
			c.eq("CTE columns (sorted)", sorted(sqlOfAll(q.SelectElements)), sorted(want))
		}
		if q.FromClause == nil || len(q.FromClause.TableReferences) != 1 {
			c.errorf("CTE: want FROM one table")
		} else {
			c.table("CTE table", q.FromClause.TableReferences[0], "jobs", "", "updlock", "readpast", "rowlock", "readcommittedlock")
		}
		if q.WhereClause == nil {
			c.errorf("CTE has no WHERE")
		} else {
			c.eq("CTE WHERE", conjuncts(q.WhereClause.SearchCondition), readyPredicate)
		}
		if q.OrderByClause == nil {
			c.errorf("CTE has no ORDER BY")
		} else {
			c.eq("CTE order", sqlOfAll(q.OrderByClause.OrderByElements), []string{"priority", "run_at", "id"})
		}
		c.moves("claim", d.into, "jobs_inflight", map[string]string{"claim_token": "@token", "claimed_until": leaseExpr})
		if d.out == nil {
			c.errorf("no OUTPUT to the client")
		} else {
			c.eq("OUTPUT", sqlOfAll(d.out.SelectColumns), claimOutput)
		}
	},
	sqlComplete: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"PredicateSetStatement", "PredicateSetStatement",
			"DeclareTableVariableStatement", "BeginTransactionStatement", "DeleteStatement", "DeleteStatement",
			"CommitTransactionStatement", "SelectStatement"})
		if len(stmts) != 8 {
			return
		}
		for _, s := range stmts[:2] {
			if p := s.(*ast.PredicateSetStatement); !p.IsOn {
				c.errorf("SET %s OFF, want ON", p.Options)
			}
		}
		c.eq("SET options", []string{stmts[0].(*ast.PredicateSetStatement).Options, stmts[1].(*ast.PredicateSetStatement).Options},
			[]string{"NoCount", "XactAbort"})
		c.eq("table references", tableRefs(stmts), []string{"alias d", "alias f", "jobs_dedupe AS d WITH (forceseek, rowlock)", "jobs_inflight AS f WITH (forceseek, rowlock)"})
		del, _ := dmlOf(stmts[4])
		c.leaseJoin("complete", del, "id", "token")
		if del.into == nil || sqlOf(del.into.IntoTable.(*ast.VariableTableReference).Variable) != "@done" {
			c.errorf("complete: want OUTPUT ... INTO @done")
		} else {
			c.eq("complete OUTPUT INTO", sqlOfAll(del.into.SelectColumns), []string{"deleted.id", "deleted.queue", "deleted.dedupe_key"})
		}
		if del.out != nil {
			c.errorf("complete: OUTPUT to the client inside the transaction")
		}
		keys, _ := dmlOf(stmts[5])
		c.table("dedupe target", keys.target, "alias d", "")
		if j := find[*ast.QualifiedJoin](keys.from); len(j) != 1 {
			c.errorf("dedupe delete: want one join")
		} else {
			c.table("dedupe table", j[0].FirstTableReference, "jobs_dedupe", "d", "rowlock", "forceseek")
			c.eq("dedupe join", conjuncts(j[0].SearchCondition), []string{"d.dedupe_key = x.dedupe_key", "d.id = x.id", "d.queue = x.queue"})
		}
		c.eq("result", sqlOfAll(stmts[7].(*ast.SelectStatement).QueryExpression.(*ast.QuerySpecification).SelectElements), []string{"id"})
	},
	sqlRetry: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"DeleteStatement"})
		d, _ := dmlOf(stmts[0])
		c.eq("table references", tableRefs(stmts[0]), []string{"alias f", "jobs", "jobs_inflight AS f WITH (forceseek, rowlock)"})
		c.leaseJoin("retry", d, "id", "token", "delay_s", "delay_ms", "dead", "snooze", "error")
		// A snooze keeps attempt and last_error and is never dead.
		c.moves("retry", d.into, "jobs", map[string]string{
			"run_at":  "DATEADD(millisecond, l.delay_ms, DATEADD(second, l.delay_s, SYSUTCDATETIME()))",
			"attempt": "CASE WHEN l.snooze = 1 THEN deleted.attempt ELSE deleted.attempt + 1 END",
			"state": "CASE WHEN l.snooze = 1 THEN 'ready'" +
				" WHEN l.dead = 1 OR deleted.attempt + 1 >= deleted.max_attempts THEN 'dead' ELSE 'ready' END",
			"last_error": "CASE WHEN l.snooze = 1 THEN deleted.last_error ELSE l.error END",
		})
		if d.out == nil {
			c.errorf("no OUTPUT of the ids moved")
		} else {
			c.eq("OUTPUT", sqlOfAll(d.out.SelectColumns), []string{"deleted.id"})
		}
	},
	sqlRelease: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"DeleteStatement"})
		d, _ := dmlOf(stmts[0])
		c.eq("table references", tableRefs(stmts[0]), []string{"alias f", "jobs", "jobs_inflight AS f WITH (forceseek, rowlock)"})
		c.leaseJoin("release", d, "id", "token")
		c.moves("release", d.into, "jobs", map[string]string{"state": "'ready'"})
		if d.out == nil {
			c.errorf("no OUTPUT of the ids moved")
		} else {
			c.eq("OUTPUT", sqlOfAll(d.out.SelectColumns), []string{"deleted.id"})
		}
	},
	sqlExtend: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"UpdateStatement"})
		d, _ := dmlOf(stmts[0])
		c.eq("table references", tableRefs(stmts[0]), []string{"alias f", "jobs_inflight AS f WITH (forceseek, rowlock)"})
		c.leaseJoin("extend", d, "id", "token")
		c.eq("SET", sqlOfAll(d.set), []string{"claimed_until = " + leaseExpr})
		if d.out == nil {
			c.errorf("no OUTPUT of the ids renewed")
		} else {
			c.eq("OUTPUT", sqlOfAll(d.out.SelectColumns), []string{"inserted.id"})
		}
	},
	sqlRescue: func(c *checker, stmts []ast.Statement) {
		// One pass at a time: when an expired lease is there to move, the
		// DELETE runs only if the application lock was granted at once, in
		// the transaction that owns the lock.
		c.eq("statements", kinds(stmts), []string{"PredicateSetStatement", "PredicateSetStatement",
			"DeclareVariableStatement", "DeclareVariableStatement", "IfStatement", "SelectStatement"})
		if len(stmts) != 6 {
			return
		}
		c.setOn(stmts[:2], "NoCount", "XactAbort")
		var decl []string
		for _, d := range find[*ast.DeclareVariableElement](stmts[2:4]) {
			decl = append(decl, d.VariableName.Value+" = "+sqlOf(d.Value))
		}
		c.eq("declared", decl, []string{"@granted = 0", "@moved = 0"})
		if q := selectOf(stmts[5]); q == nil {
			c.errorf("rescue: the result is not a plain SELECT")
		} else {
			c.eq("result", sqlOfAll(q.SelectElements), []string{"@granted", "@moved"})
		}
		due := stmts[4].(*ast.IfStatement)
		c.eq("look first", sqlOf(due.Predicate),
			"EXISTS (SELECT 1 FROM jobs_inflight WITH (readcommittedlock, readpast) WHERE claimed_until < SYSUTCDATETIME())")
		pass, ok := due.ThenStatement.(*ast.BeginEndBlockStatement)
		if !ok || pass.StatementList == nil || due.ElseStatement != nil {
			c.errorf("rescue: IF EXISTS ... is not BEGIN ... END")
			return
		}
		c.eq("pass", kinds(pass.StatementList.Statements), []string{"BeginTransactionStatement", "ExecuteStatement",
			"IfStatement", "CommitTransactionStatement"})
		if len(pass.StatementList.Statements) != 4 {
			return
		}
		c.applock("rescue lock", pass.StatementList.Statements[1], "@granted", map[string]string{
			"@Resource": "@lock_resource", "@LockMode": "'Exclusive'", "@LockOwner": "'Transaction'", "@LockTimeout": "0"})
		ifs := pass.StatementList.Statements[2].(*ast.IfStatement)
		c.eq("IF", sqlOf(ifs.Predicate), "@granted >= 0")
		if ifs.ElseStatement != nil {
			c.errorf("rescue: an ELSE branch")
		}
		block, ok := ifs.ThenStatement.(*ast.BeginEndBlockStatement)
		if !ok || block.StatementList == nil || len(block.StatementList.Statements) != 2 {
			c.errorf("rescue: IF ... THEN is not BEGIN DELETE; SET END")
			return
		}
		body := block.StatementList.Statements
		c.eq("granted", kinds(body), []string{"DeleteStatement", "SetVariableStatement"})
		if set, ok := body[1].(*ast.SetVariableStatement); ok {
			c.eq("moved", sqlOf(set.Variable)+" = "+sqlOf(set.Expression), "@moved = @@ROWCOUNT")
		}
		d, _ := dmlOf(body[0])
		c.eq("table references", tableRefs(body[0]), []string{"jobs", "jobs_inflight WITH (readcommittedlock, readpast, rowlock)"})
		c.top("DELETE", d.top, "@batch")
		c.table("DELETE target", d.target, "jobs_inflight", "", "readpast", "rowlock", "readcommittedlock")
		c.moves("rescue", d.into, "jobs", map[string]string{
			"run_at":     "SYSUTCDATETIME()",
			"attempt":    "deleted.attempt + 1",
			"state":      "CASE WHEN deleted.attempt + 1 >= deleted.max_attempts THEN 'dead' ELSE 'ready' END",
			"last_error": "@error",
		})
		if d.where == nil {
			c.errorf("no WHERE: it would move live leases")
		} else {
			c.eq("WHERE", conjuncts(d.where.SearchCondition), []string{"claimed_until < SYSUTCDATETIME()"})
		}
	},
	sqlAbandon: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"DeleteStatement"})
		d, _ := dmlOf(stmts[0])
		c.eq("table references", tableRefs(stmts[0]), []string{"jobs", "jobs_inflight WITH (rowlock)"})
		c.table("DELETE target", d.target, "jobs_inflight", "", "rowlock")
		c.moves("abandon", d.into, "jobs", map[string]string{"state": "'ready'"})
		if d.where == nil {
			c.errorf("no WHERE: it would move every lease")
		} else {
			c.eq("WHERE", conjuncts(d.where.SearchCondition), []string{"claim_token = @token"})
		}
	},
	sqlEnqueue: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"PredicateSetStatement", "DeclareTableVariableStatement",
			"InsertStatement", "InsertStatement", "SelectStatement"})
		if len(stmts) != 5 {
			return
		}
		c.eq("table references", tableRefs(stmts), []string{"jobs", "jobs_dedupe"})
		ins, _ := dmlOf(stmts[2])
		c.table("INSERT target", ins.target, "jobs", "")
		cols, _ := columns()
		got := sqlOfAll(ins.insert.Columns)
		for _, col := range got {
			if !slices.Contains(cols["jobs"], col) {
				c.errorf("INSERT names %s, not a column of jobs", col)
			}
		}
		src, ok := ins.insert.InsertSource.(*ast.SelectInsertSource)
		if !ok {
			c.errorf("INSERT source is a %T, want SELECT", ins.insert.InsertSource)
			return
		}
		q := src.Select.(*ast.QuerySpecification)
		if len(q.SelectElements) != len(got) {
			c.errorf("INSERT: %d values for %d columns", len(q.SelectElements), len(got))
		} else {
			// What the caller gives is stored as given.
			for i, col := range got {
				if slices.Contains([]string{"queue", "kind", "payload", "priority", "max_attempts", "dedupe_key"}, col) {
					c.eq("INSERT value of "+col, sqlOf(q.SelectElements[i]), "v."+col)
				}
			}
			if !slices.Contains(got, "kind") {
				c.errorf("INSERT stores no kind")
			}
		}
		// Ids are drawn in input order, so ascending ids are input order.
		nv := find[*ast.NextValueForExpression](q.SelectElements[:1])
		if len(nv) != 1 || got[0] != "id" || nv[0].OverClause == nil || nv[0].OverClause.OrderByClause == nil ||
			!reflect.DeepEqual(sqlOfAll(nv[0].OverClause.OrderByClause.OrderByElements), []string{"v.ord"}) {
			c.errorf("id is not NEXT VALUE FOR the sequence OVER (ORDER BY v.ord)")
		} else if s := nv[0].SequenceName; s.SchemaIdentifier == nil || s.SchemaIdentifier.Value != testNames.Schema ||
			s.BaseIdentifier.Value != testNames.Prefix+"jobs_id_seq" {
			c.errorf("sequence %q, want %s.%sjobs_id_seq", s.BaseIdentifier.Value, testNames.Schema, testNames.Prefix)
		}
		vals := find[*ast.InlineDerivedTable](q.FromClause)
		if len(vals) != 1 {
			c.errorf("want FROM (VALUES ...)")
		} else {
			var names []string
			for _, id := range vals[0].Columns {
				names = append(names, id.Value)
			}
			c.eq("VALUES columns", names, []string{"ord", "queue", "kind", "payload", "priority", "run_at", "delay_s", "delay_ms", "max_attempts", "dedupe_key"})
			for i, row := range vals[0].RowValues {
				if len(row.ColumnValues) > 0 && sqlOf(row.ColumnValues[0]) != fmt.Sprint(i) {
					c.errorf("row %d has ord %s", i, sqlOf(row.ColumnValues[0]))
				}
			}
		}
		if ins.into == nil {
			c.errorf("first INSERT has no OUTPUT INTO @ids")
		} else {
			c.eq("OUTPUT INTO", sqlOfAll(ins.into.SelectColumns), []string{"inserted.id", "inserted.queue", "inserted.dedupe_key"})
		}
		keys, _ := dmlOf(stmts[3])
		c.table("dedupe INSERT target", keys.target, "jobs_dedupe", "")
		c.eq("dedupe INSERT columns", sqlOfAll(keys.insert.Columns), []string{"queue", "dedupe_key", "id"})
		c.eq("dedupe filter", conjuncts(find[*ast.WhereClause](keys.insert)[0].SearchCondition), []string{"dedupe_key IS NOT NULL"})
		res := stmts[4].(*ast.SelectStatement).QueryExpression.(*ast.QuerySpecification)
		c.eq("result", sqlOfAll(res.SelectElements), []string{"id"})
		if res.OrderByClause == nil {
			c.errorf("ids not ordered")
		} else {
			c.eq("result order", sqlOfAll(res.OrderByClause.OrderByElements), []string{"id"})
		}
	},
	sqlStats: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"SelectStatement"})
		c.eq("table references", tableRefs(stmts), []string{"jobs", "jobs_inflight", "queues AS p"})
		if len(stmts) != 1 {
			return
		}
		q, ok := stmts[0].(*ast.SelectStatement).QueryExpression.(*ast.QuerySpecification)
		if !ok || len(q.SelectElements) != 7 {
			c.errorf("want 7 columns: queue, four counts, age, paused")
			return
		}
		c.eq("paused", sqlOf(q.SelectElements[6]),
			"CAST(CASE WHEN EXISTS (SELECT 1 FROM queues AS p WHERE p.paused = 1 AND p.queue = s.queue) THEN 1 ELSE 0 END AS BIT)")
	},
	sqlSavepoint: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"SaveTransactionStatement"})
	},
	sqlRollbackSavepoint: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"IfStatement"})
		if len(stmts) == 1 {
			c.eq("IF", sqlOf(stmts[0].(*ast.IfStatement).Predicate), "XACT_STATE() = 1")
			c.eq("THEN", kinds([]ast.Statement{stmts[0].(*ast.IfStatement).ThenStatement}), []string{"RollbackTransactionStatement"})
		}
	},
}

// paramRe matches an @name that is not part of an @@name.
var paramRe = regexp.MustCompile(`(?:^|[^@\w])@([A-Za-z_][A-Za-z0-9_]*)`)

// checkSQL parses the text of statement name as sent and checks it
// against its spec, then checks properties every statement must have:
// each VALUES row is as wide as its column list, and when args is not nil,
// the statement's @parameters are exactly the arguments sent with it
// (besides the variables it declares and the names of a procedure's
// parameters, as in EXEC sp_getapplock @Resource = ...).
func checkSQL(name, text string, args map[string]any) error {
	c := &checker{name: name}
	stmts, err := parseBatch(text)
	if err != nil {
		return fmt.Errorf("%s: does not parse: %w", name, err)
	}
	spec, ok := specs[name]
	if !ok {
		return fmt.Errorf("%s: no spec", name)
	}
	spec(c, stmts)
	for _, v := range find[*ast.InlineDerivedTable](stmts) {
		for i, row := range v.RowValues {
			if len(row.ColumnValues) != len(v.Columns) {
				c.errorf("VALUES row %d has %d values for %d columns", i, len(row.ColumnValues), len(v.Columns))
			}
		}
	}
	if args != nil {
		declared := map[string]bool{}
		for _, d := range find[*ast.DeclareTableVariableBody](stmts) {
			declared[d.VariableName.Value] = true
		}
		for _, d := range find[*ast.DeclareVariableElement](stmts) {
			declared[d.VariableName.Value] = true
		}
		for _, p := range find[*ast.ExecuteParameter](stmts) {
			if p.Variable != nil {
				declared[p.Variable.Name] = true
			}
		}
		used := map[string]bool{}
		for _, m := range paramRe.FindAllStringSubmatch(text, -1) {
			if !declared["@"+m[1]] {
				used[m[1]] = true
			}
		}
		var missing, unused []string
		for p := range used {
			if _, ok := args[p]; !ok {
				missing = append(missing, p)
			}
		}
		for p := range args {
			if !used[p] {
				unused = append(unused, p)
			}
		}
		if len(missing)+len(unused) > 0 {
			sort.Strings(missing)
			sort.Strings(unused)
			c.errorf("parameters without an argument %v, arguments without a parameter %v", missing, unused)
		}
	}
	return c.err()
}

// hasStatement reports whether sql holds anything but comments and blank
// lines.
func hasStatement(sql string) bool {
	for _, line := range strings.Split(sql, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "--") {
			return true
		}
	}
	return false
}
