package mysql

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

// activityPlaceholders are the activity statements and the placeholders
// each takes for n rows, as activity.go passes them; TestStatementsRender
// counts them among the statement files.
var activityPlaceholders = map[string]func(n int) int{
	sqlActivityAdd:   func(n int) int { return 7 * n },
	sqlActivity:      func(int) int { return 1 },
	sqlActivityPrune: func(int) int { return 2 },
	sqlProcessTouch:  func(int) int { return 10 },
	sqlProcessRemove: func(int) int { return 1 },
	sqlProcessPrune:  func(int) int { return 1 },
	sqlProcesses:     func(int) int { return 0 },
}

// The activity statements render with the tables of their names and as
// many placeholders as activity.go passes; the batch upsert adds, reading
// no VALUES() (deprecated in MySQL 8.0.20) and no row alias (which MariaDB
// lacks).
func TestActivityStatementsRender(t *testing.T) {
	st, err := newStatements(dialect.Names{Schema: "app", Prefix: "q1_"}, 7)
	if err != nil {
		t.Fatal(err)
	}
	for name, count := range activityPlaceholders {
		table := "`app`.`q1_activity`"
		if strings.HasPrefix(name, "process") {
			table = "`app`.`q1_processes`"
		}
		for _, n := range []int{1, 3, 100} {
			q := st.get(name, n)
			if got := strings.Count(q, "?"); got != count(n) {
				t.Errorf("%s(%d): %d placeholders, want %d:\n%s", name, n, got, count(n), q)
			}
			if !strings.Contains(q, table) || strings.Contains(q, "{{") || strings.Contains(q, "--") || strings.Contains(q, "dbq_") {
				t.Errorf("%s: names or markers wrong:\n%s", name, q)
			}
		}
	}
	add := st.get(sqlActivityAdd, 2)
	for _, want := range []string{"completed = `app`.`q1_activity`.completed + s.completed", "UNION ALL"} {
		if !strings.Contains(add, want) {
			t.Errorf("activity_add lacks %q:\n%s", want, add)
		}
	}
	if strings.Contains(add, "VALUES(") || strings.Contains(st.get(sqlProcessTouch, 0), "VALUES(") {
		t.Errorf("an upsert reads VALUES()")
	}
	if q := st.get(sqlActivityPrune, 0); !strings.Contains(q, "ORDER BY minute\nLIMIT ?") {
		t.Errorf("the prune is not bounded:\n%s", q)
	}
}

// A kind is stored as sent: not padded (CAST AS BINARY(n) would pad it
// with zero bytes), and the rows of two kinds, or two processes, stay
// apart.
func TestActivityStoresKindsAsSent(t *testing.T) {
	_, d := openQueue(t, Config{}, true)
	ctx := context.Background()
	m := time.Now().UTC().Truncate(time.Minute)
	for range 2 {
		if err := d.AddActivity(ctx, []queue.ActivityCount{
			{Process: "p1", Queue: "q", Kind: "émail", Minute: m, Completed: 1},
			{Process: "p1", Queue: "q", Kind: "", Minute: m, Completed: 1},
			{Process: "p2", Queue: "q", Kind: "émail", Minute: m, Completed: 1},
		}); err != nil {
			t.Fatal(err)
		}
	}
	table := strings.TrimSuffix(d.stmts.jobsTable, "jobs`") + "activity`"
	rows, err := d.db.QueryContext(ctx, "SELECT process, kind, completed FROM "+table+" ORDER BY process, kind")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var (
			p, k string
			n    int
		)
		if err := rows.Scan(&p, &k, &n); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s/%q/%d", p, k, n))
	}
	want := []string{`p1/""/2`, `p1/"émail"/2`, `p2/"émail"/2`}
	if !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
}
