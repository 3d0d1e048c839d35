package mysql

import (
	"strings"
	"testing"

	"github.com/dbqueue/dbq/dialect"
)

// countPlaceholders are the bind parameters of the statements of
// CountQueues and FindDedupe.
var countPlaceholders = map[string]int{sqlCountQueue: 12, sqlFindDedupe: 2}

func TestCountStatementsRender(t *testing.T) {
	st, err := newStatements(dialect.Names{Schema: "app", Prefix: "q1_"}, 7)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range countPlaceholders {
		q := st.get(name, 0)
		if got := strings.Count(q, "?"); got != want {
			t.Errorf("%s: %d placeholders, want %d:\n%s", name, got, want, q)
		}
		if !strings.Contains(q, "`app`.`q1_jobs`") || strings.Contains(q, "{{") || strings.Contains(q, "--") {
			t.Errorf("%s: table not named, or template or comment left:\n%s", name, q)
		}
	}
}
