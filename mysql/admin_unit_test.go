package mysql

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dbqueue/dbq/dialect"
)

// These tests need no server.

// Each Jobs filter adds fixed text with a placeholder for its value, in
// the order Jobs passes them; no variant holds a value.
func TestJobsStatement(t *testing.T) {
	st, err := newStatements(dialect.Names{Schema: "app", Prefix: "q1_"}, 5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, c := range []struct {
		byQueue, byState, byKind, dead bool
		where, index                   string
	}{
		{false, false, false, false, "WHERE id > ?\n", "PRIMARY"},
		{true, false, false, false, "WHERE id > ? AND queue = ?\n", "PRIMARY"},
		{false, true, false, false, "WHERE id > ? AND state = ?\n", "PRIMARY"},
		{false, true, false, true, "WHERE id > ? AND state = ?\n", "PRIMARY"}, // no queue: the claim index does not help
		{true, true, false, false, "WHERE id > ? AND queue = ? AND state = ?\n", "PRIMARY"},
		{true, true, false, true, "WHERE id > ? AND queue = ? AND state = ?\n", "`q1_jobs_claim`"},
		{false, false, true, false, "WHERE id > ? AND kind = ?\n", "PRIMARY"},
		{true, false, true, false, "WHERE id > ? AND queue = ? AND kind = ?\n", "PRIMARY"},
		{false, true, true, true, "WHERE id > ? AND state = ? AND kind = ?\n", "PRIMARY"},
		{true, true, true, false, "WHERE id > ? AND queue = ? AND state = ? AND kind = ?\n", "PRIMARY"},
		{true, true, true, true, "WHERE id > ? AND queue = ? AND state = ? AND kind = ?\n", "`q1_jobs_claim`"},
	} {
		name := fmt.Sprintf("jobs(queue %v, state %v, kind %v, dead %v)", c.byQueue, c.byState, c.byKind, c.dead)
		q := st.jobs(c.byQueue, c.byState, c.byKind, c.dead)
		if !strings.Contains(q, c.where) || !strings.Contains(q, "FORCE INDEX ("+c.index+")") {
			t.Errorf("%s: want %q and index %s:\n%s", name, c.where, c.index, q)
		}
		if !strings.HasSuffix(q, "ORDER BY id\nLIMIT ?") || !strings.Contains(q, "FROM `app`.`q1_jobs`") {
			t.Errorf("%s: not a page in id order:\n%s", name, q)
		}
		for _, v := range []string{"'ready'", "'claimed'", "'dead'", "{{", "--"} {
			if strings.Contains(q, v) {
				t.Errorf("%s holds %s:\n%s", name, v, q)
			}
		}
		if again := st.jobs(c.byQueue, c.byState, c.byKind, c.dead); again != q {
			t.Errorf("%s changed between calls", name)
		}
		// The cache keeps the variants apart: one text per distinct filter.
		if prev, ok := seen[q]; ok && c.where != prev {
			t.Errorf("%s: same text as the variant for %q", name, prev)
		}
		seen[q] = c.where
	}
}

// Rescue lock names are at most 64 characters (GET_LOCK's limit), name
// both the database and the table when they fit, and differ between
// tables and databases when they do not.
func TestRescueLockName(t *testing.T) {
	long := strings.Repeat("d", 64)
	names := map[string]string{}
	for _, c := range [][2]string{
		{"app", "dbq_jobs"}, {"app", "other_jobs"}, {"app2", "dbq_jobs"}, {"", "dbq_jobs"},
		{long, "dbq_jobs"}, {long, "q2_jobs"}, {long + "x", "dbq_jobs"}, {"app", strings.Repeat("p", 59) + "jobs"},
	} {
		n := rescueLockName(c[0], c[1])
		if len(n) > 64 || !strings.HasPrefix(n, "dbq_rescue:") {
			t.Errorf("rescueLockName(%q, %q) = %q (%d bytes)", c[0], c[1], n, len(n))
		}
		if len(c[0])+len(c[1]) < 40 && n != "dbq_rescue:"+c[0]+"."+c[1] {
			t.Errorf("rescueLockName(%q, %q) = %q, want the names themselves", c[0], c[1], n)
		}
		if prev, dup := names[n]; dup {
			t.Errorf("rescueLockName(%q, %q) = %q, as for %s", c[0], c[1], n, prev)
		}
		names[n] = c[0] + "." + c[1]
		if rescueLockName(c[0], c[1]) != n {
			t.Errorf("rescueLockName(%q, %q) is not stable", c[0], c[1])
		}
	}
}
