package main

import (
	"context"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
)

// TestNoPasswordInOutput drives every command with DSNs that carry a
// distinctive password — servers that refuse the connection, servers that
// answer but reject the credentials, DSNs that do not parse — and checks
// that the password appears nowhere: not in what the command prints, not
// in the error it returns (before main redacts it), not in its log lines
// on stderr, with --verbose on.
//
// It swaps os.Stderr, where the CLI logs, so it does not run in parallel.
func TestNoPasswordInOutput(t *testing.T) {
	const pw = "Zq9-hunter2-Secret"
	odd := "p@ss:w0rd/" + pw + ";x=y" // needs escaping in a URL; decoded, it holds pw
	esc := url.UserPassword("u", odd).String()[2:]
	host := func(d dialect.Name) string { // the test server, host:port
		u, err := url.Parse(dbtest.DSN(d))
		if err != nil {
			return "127.0.0.1:1"
		}
		return u.Host
	}
	pg, my := host(dialect.Postgres), host(dialect.MySQL)
	dsns := []string{
		// Nothing listens on port 1: connection refused.
		"postgres://dbq:" + pw + "@127.0.0.1:1/test?sslmode=disable&connect_timeout=2",
		"mysql://dbq:" + pw + "@127.0.0.1:1/test?timeout=2s",
		"sqlserver://sa:" + pw + "@127.0.0.1:1?database=master&dial+timeout=2",
		"postgres://dbq:" + esc + "@127.0.0.1:1/test?connect_timeout=2",
		"mysql://dbq:" + esc + "@127.0.0.1:1/test?timeout=2s",
		// The test servers answer and reject these credentials (the
		// PostgreSQL server trusts every user it has, so the user is
		// unknown; MariaDB's root has no password).
		"postgres://no_such_user_dbq:" + pw + "@" + pg + "/test?sslmode=disable&connect_timeout=2",
		"mysql://root:" + pw + "@" + my + "/test?timeout=2s",
		"mysql://root:" + esc + "@" + my + "/test?timeout=2s",
		// DSNs that do not parse.
		"postgres://dbq:" + pw + "@127.0.0.1:notaport/test",
		"mysql://dbq:" + pw + "@127.0.0.1:3306/test?%zz",
		"mysql://dbq:" + pw + "@[::1/test",
		"oracle://dbq:" + pw + "@127.0.0.1/test",
		"host=127.0.0.1 port=1 user=dbq password=" + pw,
		"dbq:" + pw + "@tcp(127.0.0.1:1)/test",
		"sqlserver://127.0.0.1:1?user+id=sa&password=" + pw + "&dial+timeout=2",
	}
	commands := [][]string{
		{"migrate", "up"},
		{"migrate", "status"},
		{"migrate", "down", "--to", "0"},
		{"enqueue", "-q", "secrets", "payload"},
		{"stats"},
		{"stats", "--json"},
		{"work", "-q", "secrets", "--poll", "50ms", "--", "true"},
	}
	stderr := captureStderr(t)
	for _, dsn := range dsns {
		for _, cmd := range commands {
			args := append([]string{"--dsn", dsn, "--verbose", "--prefix", "secrets_"}, cmd...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out, err := dbqCmd(ctx, "", args...)
			cancel()
			shown := strings.Join(args[2:], " ")
			if err == nil {
				t.Errorf("dbq %s with a bad DSN succeeded:\n%s", shown, out)
			}
			for what, s := range map[string]string{"output": out, "stderr": stderr()} {
				if leaked(s, pw, esc) {
					t.Errorf("dbq %s: the password is in its %s:\n%s", shown, what, s)
				}
			}
			if err != nil && leaked(err.Error(), pw, esc) {
				t.Errorf("dbq %s: the password is in its error: %s", shown, err)
			}
		}
	}
	// $DBQ_DSN is read when --dsn is not given.
	t.Setenv("DBQ_DSN", dsns[0])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := dbqCmd(ctx, "", "stats", "--verbose")
	if err == nil || leaked(out+stderr()+err.Error(), pw, esc) {
		t.Errorf("dbq stats with $DBQ_DSN: error %v, output:\n%s", err, out)
	}
}

func leaked(s string, secrets ...string) bool {
	for _, p := range secrets {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// captureStderr points os.Stderr at a file until t ends and returns a func
// that reads what was written since its last call.
func captureStderr(t *testing.T) func() string {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	orig := os.Stderr
	os.Stderr = f
	t.Cleanup(func() {
		os.Stderr = orig
		f.Close()
	})
	var off int64
	return func() string {
		b, _ := io.ReadAll(io.NewSectionReader(f, off, 1<<30))
		off += int64(len(b))
		return string(b)
	}
}
