package mssql

// The specs of the schedule statements (see tsql_test.go for the checker)
// and the fake-driver run that sends each of them.

import (
	"context"
	"database/sql/driver"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/sqlc-dev/teesql/ast"
)

func init() {
	for name, spec := range scheduleSpecs {
		specs[name] = spec
	}
}

// utcParam is how a time parameter becomes a DATETIME2 in UTC.
func utcParam(p string) string { return "CONVERT(DATETIME2(6), SWITCHOFFSET(" + p + ", '+00:00'))" }

var scheduleSpecs = map[string]func(c *checker, stmts []ast.Statement){
	sqlScheduleUpsert: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"PredicateSetStatement", "PredicateSetStatement",
			"BeginTransactionStatement", "UpdateStatement", "IfStatement", "CommitTransactionStatement"})
		c.eq("table references", tableRefs(stmts), []string{"schedules", "schedules WITH (holdlock, updlock)"})
		if len(stmts) != 6 {
			return
		}
		c.setOn(stmts[:2], "NoCount", "XactAbort")
		up, _ := dmlOf(stmts[3])
		c.table("UPDATE target", up.target, "schedules", "", "updlock", "holdlock")
		// The last tick and the paused flag are the schedulers' and the
		// operator's: an upsert leaves them.
		// spec_since moves only when the spec or zone changes: the SET
		// reads the row as it was.
		c.eq("SET", sqlOfAll(up.set), []string{
			"spec_since = CASE WHEN spec = @spec AND time_zone = @time_zone THEN spec_since ELSE " + utcParam("@at") + " END",
			"spec = @spec", "time_zone = @time_zone", "queue = @queue",
			"next_tick = " + utcParam("@next_tick"), "seen_at = " + utcParam("@at"), "updated_at = SYSUTCDATETIME()"})
		if up.where == nil {
			c.errorf("UPDATE without WHERE")
		} else {
			c.eq("WHERE", conjuncts(up.where.SearchCondition), []string{"name = @name"})
		}
		ifs := stmts[4].(*ast.IfStatement)
		c.eq("IF", sqlOf(ifs.Predicate), "@@ROWCOUNT = 0")
		ins, ok := dmlOf(ifs.ThenStatement)
		if !ok || ins.insert == nil {
			c.errorf("IF ... THEN is not an INSERT")
			return
		}
		c.eq("INSERT columns", sqlOfAll(ins.insert.Columns), []string{"name", "spec", "time_zone", "queue", "next_tick", "spec_since", "seen_at", "paused", "updated_at"})
	},
	sqlScheduleAdvance: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"PredicateSetStatement", "UpdateStatement"})
		c.eq("table references", tableRefs(stmts), []string{"schedules WITH (rowlock)"})
		// In the driver's transaction, which EnqueueUnique joins: no
		// transaction of its own.
		if n := len(find[*ast.BeginTransactionStatement](stmts)) + len(find[*ast.CommitTransactionStatement](stmts)); n != 0 {
			c.errorf("a transaction of its own")
		}
		if len(stmts) != 2 {
			return
		}
		up, _ := dmlOf(stmts[1])
		c.eq("SET", sqlOfAll(up.set), []string{"last_tick = " + utcParam("@tick"), "next_tick = " + utcParam("@next_tick"),
			"updated_at = SYSUTCDATETIME()"})
		if up.where == nil {
			c.errorf("UPDATE without WHERE")
		} else {
			// The tick is recorded only over an older one: the licence to
			// enqueue it is this row.
			c.eq("WHERE", conjuncts(up.where.SearchCondition), []string{
				"(last_tick IS NULL OR last_tick < " + utcParam("@tick") + ")", "name = @name"})
		}
		if up.out == nil || up.into != nil {
			c.errorf("want OUTPUT to the client, not INTO")
		} else {
			c.eq("OUTPUT", sqlOfAll(up.out.SelectColumns), []string{"inserted.paused"})
		}
	},
	sqlSchedules: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"SelectStatement"})
		c.eq("table references", tableRefs(stmts), []string{"schedules"})
		q := selectOf(stmts[0])
		if q == nil || q.OrderByClause == nil {
			c.errorf("want SELECT ... ORDER BY name")
			return
		}
		c.eq("columns", sqlOfAll(q.SelectElements), []string{"name", "spec", "time_zone", "queue", "last_tick", "next_tick", "paused", "updated_at", "spec_since", "seen_at"})
		c.eq("order", sqlOfAll(q.OrderByClause.OrderByElements), []string{"name"})
	},
	sqlScheduleSetPaused: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"PredicateSetStatement", "UpdateStatement"})
		c.eq("table references", tableRefs(stmts), []string{"schedules"})
		if len(stmts) != 2 {
			return
		}
		up, _ := dmlOf(stmts[1])
		c.eq("SET", sqlOfAll(up.set), []string{"paused = @paused", "updated_at = SYSUTCDATETIME()"})
		if up.where == nil || up.out == nil {
			c.errorf("want UPDATE ... OUTPUT ... WHERE")
			return
		}
		c.eq("WHERE", conjuncts(up.where.SearchCondition), []string{"name = @name"})
		c.eq("OUTPUT", sqlOfAll(up.out.SelectColumns), []string{"inserted.name"})
	},
	sqlScheduleDelete: func(c *checker, stmts []ast.Statement) {
		c.eq("statements", kinds(stmts), []string{"PredicateSetStatement", "DeleteStatement"})
		c.eq("table references", tableRefs(stmts), []string{"schedules"})
		if len(stmts) != 2 {
			return
		}
		del, _ := dmlOf(stmts[1])
		if del.where == nil || del.out == nil || del.into != nil {
			c.errorf("want DELETE ... OUTPUT ... WHERE")
			return
		}
		// A prune removes only a row no scheduler refreshed meanwhile.
		c.eq("WHERE", conjuncts(del.where.SearchCondition), []string{
			"(@seen_before IS NULL OR seen_at IS NULL OR seen_at < " + utcParam("@seen_before") + ")", "name = @name"})
		c.eq("OUTPUT", sqlOfAll(del.out.SelectColumns), []string{"deleted.name"})
	},
}

// The checker rejects schedule statements that parse but lack what the
// one-job-per-tick promise depends on.
func TestCheckerRejectsSchedules(t *testing.T) {
	stmts, err := renderStatements(testNames)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, old, new string }{
		{sqlScheduleAdvance, "AND (last_tick IS NULL OR last_tick < CONVERT(DATETIME2(6), SWITCHOFFSET(@tick, '+00:00')))", ""},
		{sqlScheduleAdvance, "last_tick < ", "last_tick <= "},
		{sqlScheduleAdvance, "OUTPUT inserted.paused", ""},
		{sqlScheduleUpsert, "WITH (UPDLOCK, HOLDLOCK)", ""},
		{sqlScheduleUpsert, "queue = @queue,", "queue = @queue, paused = 0,"},
		{sqlScheduleSetPaused, "OUTPUT inserted.name", ""},
		{sqlScheduleUpsert, "ELSE CONVERT(DATETIME2(6), SWITCHOFFSET(@at, '+00:00')) END", "ELSE spec_since END"},
		{sqlScheduleDelete, "OR seen_at < ", "OR seen_at > "},
	} {
		text := stmts.text(c.name)
		if !strings.Contains(text, c.old) {
			t.Fatalf("%s has no %q; fix the test", c.name, c.old)
		}
		if err := checkSQL(c.name, strings.Replace(text, c.old, c.new, 1), nil); err == nil {
			t.Errorf("%s without %q passes", c.name, c.old)
		}
	}
}

// scheduleStatementsSent drives every ScheduleStore method over a fake
// database and returns what it sent, for TestEveryStatementSentIsChecked.
// It checks the results the driver makes of the scripted answers.
func scheduleStatementsSent(t *testing.T) []sentStmt {
	t.Helper()
	ctx := context.Background()
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	advanced, paused, found := true, false, true
	q, _, f := newFakeQueue(t, Config{}, func(s sentStmt) fakeAnswer {
		switch s.name {
		case sqlScheduleAdvance:
			if !advanced {
				return fakeAnswer{cols: []string{"paused"}}
			}
			return fakeAnswer{cols: []string{"paused"}, rows: [][]driver.Value{{paused}}}
		case sqlScheduleSetPaused:
			if !found {
				return fakeAnswer{cols: []string{"name"}}
			}
			return fakeAnswer{cols: []string{"name"}, rows: [][]driver.Value{{"s"}}}
		case sqlSchedules:
			return fakeAnswer{rows: [][]driver.Value{{"s", "@hourly", "UTC", "q", nil, tick, false, tick, nil, tick}}}
		case sqlScheduleDelete:
			if !found {
				return fakeAnswer{cols: []string{"name"}}
			}
			return fakeAnswer{cols: []string{"name"}, rows: [][]driver.Value{{"s"}}}
		}
		return answerOK(s)
	})
	if err := q.UpsertSchedule(ctx, queue.ScheduleDef{Name: "s", Spec: "@hourly", TimeZone: "UTC", Queue: "q", NextTick: tick}); err != nil {
		t.Fatal(err)
	}
	adv := queue.Tick{Schedule: "s", At: tick, Next: tick.Add(time.Hour), Job: queue.NewJob{Queue: "q", Kind: "report", RunAt: tick, DedupeKey: "k"}}
	if r, err := q.AdvanceSchedule(ctx, adv); err != nil || !r.Advanced || r.JobID != 42 {
		t.Fatalf("advance: %+v, %v", r, err)
	}
	if sent := f.named(sqlEnqueueUnique); len(sent) != 1 || sent[0].args["kind"] != "report" {
		t.Errorf("the tick's job was enqueued with %d statements, kind %v; want its kind", len(sent), sent)
	}
	paused = true
	if r, err := q.AdvanceSchedule(ctx, adv); err != nil || !r.Advanced || !r.Paused || r.JobID != 0 {
		t.Fatalf("advance of a paused schedule: %+v, %v", r, err)
	}
	advanced = false
	if r, err := q.AdvanceSchedule(ctx, adv); err != nil || r.Advanced {
		t.Fatalf("advance of a tick taken: %+v, %v", r, err)
	}
	if got, err := q.Schedules(ctx); err != nil || len(got) != 1 || !got[0].LastTick.IsZero() || !got[0].NextTick.Equal(tick) {
		t.Fatalf("schedules: %+v, %v", got, err)
	}
	if err := q.PauseSchedule(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if got, err := q.PruneSchedules(ctx, tick.Add(time.Hour)); err != nil || len(got) != 1 {
		t.Fatalf("prune: %v, %v", got, err)
	}
	found = false
	if err := q.ResumeSchedule(ctx, "s"); !errors.Is(err, queue.ErrScheduleNotFound) {
		t.Fatalf("resume of a schedule not stored: %v", err)
	}
	if err := q.DeleteSchedule(ctx, "s"); !errors.Is(err, queue.ErrScheduleNotFound) {
		t.Fatalf("delete of a schedule not stored: %v", err)
	}
	// A job is enqueued only in the advance's own transaction.
	inTx := map[string]bool{sqlScheduleAdvance: true, sqlSavepoint: true, sqlEnqueueUnique: true}
	for _, s := range f.statements() {
		if inTx[s.name] != s.tx {
			t.Errorf("%s sent in a transaction: %v", s.name, s.tx)
		}
	}
	return f.statements()
}

// Version 8 adds spec_since and seen_at to schedules: nullable (rows made
// before it have neither until a scheduler stores them), DATETIME2(6) in
// UTC as the other schedule times; seen_at starts as updated_at. Down drops
// both.
func TestScheduleSeenMigration(t *testing.T) {
	stmts, dropped := migrationVersion(t, "00008_schedule_seen.sql")
	// One column per ALTER TABLE: Babelfish refuses a list (TestLiveMigrateWithoutSchema).
	if got := kinds(stmts); !slices.Equal(got, []string{"AlterTableAddTableElementStatement", "AlterTableAddTableElementStatement", "UpdateStatement"}) {
		t.Fatalf("up: %v", got)
	}
	var added []string
	for _, st := range stmts[:2] {
		a := st.(*ast.AlterTableAddTableElementStatement)
		if table := strings.TrimPrefix(a.SchemaObjectName.BaseIdentifier.Value, testNames.Prefix); table != "schedules" {
			t.Errorf("adds to %s", table)
		}
		if n := len(a.Definition.ColumnDefinitions); n != 1 {
			t.Errorf("one ALTER TABLE adds %d columns, want 1 (Babelfish refuses a list)", n)
		}
		for _, c := range a.Definition.ColumnDefinitions {
			added = append(added, c.ColumnIdentifier.Value+" "+typeName(c.DataType))
			notNull := c.Nullable != nil && !c.Nullable.Nullable
			for _, n := range find[*ast.NullableConstraintDefinition](c.Constraints) {
				notNull = notNull || !n.Nullable
			}
			if notNull || c.DefaultConstraint != nil {
				t.Errorf("%s is NOT NULL or has a default", c.ColumnIdentifier.Value)
			}
		}
	}
	if want := []string{"spec_since DATETIME2(6)", "seen_at DATETIME2(6)"}; !slices.Equal(added, want) {
		t.Errorf("adds %v, want %v", added, want)
	}
	up, _ := dmlOf(stmts[2])
	if got := sqlOfAll(up.set); !slices.Equal(got, []string{"seen_at = updated_at"}) || up.where != nil {
		t.Errorf("UPDATE sets %v (where %v), want seen_at = updated_at on every row", got, up.where)
	}
	var gone []string
	for _, s := range dropped {
		d, ok := s.(*ast.AlterTableDropTableElementStatement)
		if !ok {
			t.Fatalf("down: a %T", s)
		}
		for _, e := range d.AlterTableDropTableElements {
			gone = append(gone, e.TableElementType+" "+e.Name.Value)
		}
	}
	if want := []string{"Column seen_at", "Column spec_since"}; !slices.Equal(gone, want) {
		t.Errorf("down drops %v, want %v", gone, want)
	}
}
