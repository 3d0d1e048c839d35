package mysql

import (
	"strings"
	"testing"

	"github.com/dbqueue/dbq/dialect"
)

// countPlaceholders are the bind parameters of the statements of
// CountQueues and FindDedupe, for n: count_queue.sql takes the queue, its
// n ready priorities and the limit twice (ready, scheduled) when n > 0,
// then six more.
var countPlaceholders = map[string]func(n int) int{
	sqlQueueNames: func(int) int { return 0 },
	sqlCountQueue: func(n int) int {
		if n == 0 {
			return 6
		}
		return 6 + 2*(n+2)
	},
	sqlFindDedupe: func(int) int { return 2 },
}

func TestCountStatementsRender(t *testing.T) {
	st, err := newStatements(dialect.Names{Schema: "app", Prefix: "q1_"}, 7)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range countPlaceholders {
		for _, n := range []int{0, 1, 3} {
			q := st.get(name, n)
			if got := strings.Count(q, "?"); got != want(n) {
				t.Errorf("%s(%d): %d placeholders, want %d:\n%s", name, n, got, want(n), q)
			}
			if !strings.Contains(q, "`app`.`q1_jobs`") || strings.Contains(q, "{{") || strings.Contains(q, "--") {
				t.Errorf("%s(%d): table not named, or template or comment left:\n%s", name, n, q)
			}
			if name == sqlCountQueue && strings.Contains(q, "IN (") != (n > 0) {
				t.Errorf("%s(%d): an IN list only with priorities:\n%s", name, n, q)
			}
		}
	}
}
