package mysql

import (
	"strings"
	"testing"

	"github.com/dbqueue/dbq/dialect"
)

// schedulePlaceholders are the schedule statements and the placeholders
// each takes; TestStatementsRender counts them among the statement files.
var schedulePlaceholders = map[string]int{
	sqlScheduleUpsert:    15,
	sqlScheduleAdvance:   4,
	sqlSchedulePaused:    1,
	sqlSchedules:         0,
	sqlScheduleSetPaused: 2,
	sqlScheduleDelete:    3,
}

// The schedule statements render with the schedules table of their names,
// and with as many placeholders as schedule.go passes.
func TestScheduleStatementsRender(t *testing.T) {
	st, err := newStatements(dialect.Names{Schema: "app", Prefix: "q1_"}, 7)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range schedulePlaceholders {
		q := st.get(name, 0)
		if got := strings.Count(q, "?"); got != want {
			t.Errorf("%s: %d placeholders, want %d:\n%s", name, got, want, q)
		}
		if !strings.Contains(q, "`app`.`q1_schedules`") || strings.Contains(q, "{{") || strings.Contains(q, "--") {
			t.Errorf("%s does not name `app`.`q1_schedules` alone:\n%s", name, q)
		}
	}
	// The advance changes the row only when the tick is newer.
	if q := st.get(sqlScheduleAdvance, 0); !strings.Contains(q, "WHERE name = ? AND (last_tick IS NULL OR last_tick < CAST(? AS DATETIME(6)))") {
		t.Errorf("advance is not conditional:\n%s", q)
	}
}
