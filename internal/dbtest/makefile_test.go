package dbtest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMakeTiDBFollowsItsPort: make test-tidb points the tests at the port
// scripts/tidb.sh starts TiDB on — TIDB_PORT, from the command line or
// the environment — and at 4000 by default. make -n prints the recipe
// without running it.
func TestMakeTiDBFollowsItsPort(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	dsn := regexp.MustCompile(`DBQ_MYSQL_DSN='([^']*)'`)
	for _, c := range []struct {
		args, env []string
		want      string
	}{
		{nil, nil, "mysql://root@127.0.0.1:4000/test"},
		{[]string{"TIDB_PORT=4123"}, nil, "mysql://root@127.0.0.1:4123/test"},
		{nil, []string{"TIDB_PORT=4124"}, "mysql://root@127.0.0.1:4124/test"},
		{[]string{"TIDB_PORT=4125", "TIDB_DSN=mysql://u@h:1/d"}, nil, "mysql://u@h:1/d"},
	} {
		cmd := exec.Command("make", append([]string{"-n", "-s", "-C", filepath.Join("..", ".."), "test-tidb"}, c.args...)...)
		// A fake server binary, so that the recipe is not the skip, and
		// none of the caller's TiDB settings.
		cmd.Env = []string{"TIDB_SERVER=/bin/true"}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "TIDB_") && !strings.HasPrefix(kv, "MAKE") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, c.env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n test-tidb %v: %v\n%s", c.args, err, out)
		}
		m := dsn.FindSubmatch(out)
		if m == nil || string(m[1]) != c.want {
			t.Errorf("make test-tidb %v (env %v) runs the tests on %q, want %s:\n%s", c.args, c.env, m, c.want, out)
		}
	}
}
