package main

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/dbtest"
)

// dsnPasswords hold each character a URL must escape in its user info:
// the two of the report that leaked ("… lookup ng-Secret-9@127.0.0.1: no
// such host", "… 9@127.0.0.1:5432/db") and one whose pieces are long
// enough to be told apart from the rest of any message.
var dsnPasswords = []string{"Wr@ng-Secret-9", "Se/cret#Pw?9", "Kq3v@Frag2x?Frag3y#Frag4z/Frag5w:Frag6v"}

// passwordPieces returns pw, its escaped spellings and its parts between
// @ ? # / : of three bytes or more (with what follows them in the DSN, as
// the leaked "9@127.0.0.1"): none may be shown.
func passwordPieces(pw string) []string {
	out := []string{pw, url.QueryEscape(pw), url.PathEscape(pw), pw[strings.LastIndexAny(pw, "@?#/:"):] + "@"}
	for _, p := range strings.FieldsFunc(pw, func(r rune) bool { return strings.ContainsRune("@?#/:", r) }) {
		if len(p) >= 3 {
			out = append(out, p)
		}
	}
	return out
}

// dsnCase is a DSN that cannot be used and what its message must name.
type dsnCase struct {
	name, dsn, pw string
	cause         []string // each must be in the error
}

// badDSNCases are, per password, DSNs of every dialect that fail: the
// password not URL-escaped (refused before any driver reads it), escaped
// but wrong or for a user the server does not know (the servers answer),
// escaped with a host that refuses or does not resolve, a URL mixed with
// the MySQL driver's form, the driver's own forms, and SQLite, which takes
// no password.
func badDSNCases(t *testing.T) []dsnCase {
	host := func(d dialect.Name, def string) string {
		if u, err := url.Parse(dbtest.DSN(d)); err == nil && u.Host != "" {
			return u.Host
		}
		return def
	}
	pg, my := host(dialect.Postgres, "127.0.0.1:5432"), host(dialect.MySQL, "127.0.0.1:3306")
	escape := "the password must be URL-escaped (%40 for @, %3F for ?, %23 for #, %2F for /"
	var cs []dsnCase
	for _, pw := range dsnPasswords {
		esc := func(user string) string { return url.UserPassword(user, pw).String() }
		cs = append(cs,
			dsnCase{"pg unescaped", "postgres://u:" + pw + "@" + pg + "/test?sslmode=disable", pw, []string{escape}},
			dsnCase{"mysql unescaped", "mysql://root:" + pw + "@" + my + "/test", pw, []string{escape}},
			dsnCase{"mariadb unescaped", "mariadb://root:" + pw + "@" + my + "/test", pw, []string{escape}},
			dsnCase{"mssql unescaped", "sqlserver://sa:" + pw + "@127.0.0.1:1?database=master", pw, []string{escape}},
			// The PostgreSQL test server trusts its users whatever their
			// password, so a user it does not have makes it refuse.
			dsnCase{"pg unknown user", "postgres://" + esc("dbq_no_such_role") + "@" + pg + "/test?sslmode=disable&connect_timeout=5", pw,
				[]string{`role "dbq_no_such_role" does not exist`}},
			dsnCase{"pg libpq unknown user", "host=" + strings.Split(pg, ":")[0] + " port=" + strings.Split(pg, ":")[1] +
				" user=dbq_no_such_role password='" + pw + "' dbname=test sslmode=disable", pw, []string{`role "dbq_no_such_role" does not exist`}},
			dsnCase{"pg refused", "postgres://" + esc("u") + "@127.0.0.1:1/test?connect_timeout=5", pw, []string{"connection refused"}},
			dsnCase{"pg no such host", "postgres://" + esc("u") + "@dbq-no-such-host.invalid:5432/test?connect_timeout=5", pw,
				[]string{"no such host"}},
			dsnCase{"mysql wrong password", "mysql://" + esc("root") + "@" + my + "/test?timeout=5s", pw, []string{"Access denied for user 'root'"}},
			dsnCase{"mariadb wrong password", "mariadb://" + esc("root") + "@" + my + "/test?timeout=5s", pw, []string{"Access denied for user 'root'"}},
			dsnCase{"mysql driver form wrong password", "root:" + pw + "@tcp(" + my + ")/test?timeout=5s", pw, []string{"Access denied for user 'root'"}},
			dsnCase{"mysql refused", "mysql://" + esc("root") + "@127.0.0.1:1/test?timeout=5s", pw, []string{"connection refused"}},
			dsnCase{"mssql refused", "sqlserver://" + esc("sa") + "@127.0.0.1:1?database=master&dial+timeout=5", pw, []string{"connection refused"}},
			dsnCase{"mysql mixed", "mysql://" + esc("root") + "@tcp(" + my + ")/test", pw,
				[]string{"mysql://user:pass@host:3306/db", "user:pass@tcp(host:3306)/db"}},
			dsnCase{"sqlite with a password", "sqlite://" + esc("u") + "@h/x.db", pw, []string{"takes no user or password"}},
		)
	}
	return cs
}

// TestDSNPasswordNeverShown runs every command that connects — migrate,
// enqueue, stats, check, work (with --wait-for-db, whose retries log),
// ui, and move with the bad DSN as --from and as --to — on DSNs whose
// password holds @ ? # / :, escaped and not, against the real servers
// (wrong credentials, a closed port, a host that does not resolve), and
// checks that no piece of the password is in stdout, stderr (where the
// log goes, --verbose on) or the error, and that the error names the
// cause.
//
// It swaps os.Stderr, where the CLI logs, so it does not run in parallel.
func TestDSNPasswordNeverShown(t *testing.T) {
	good := "sqlite:" + filepath.Join(t.TempDir(), "good.db")
	mustRun(t, "", "--dsn", good, "migrate", "up")
	commands := []struct {
		name string
		args func(dsn string) []string
	}{
		{"migrate up", func(d string) []string { return []string{"--dsn", d, "migrate", "up"} }},
		{"migrate status", func(d string) []string { return []string{"--dsn", d, "migrate", "status"} }},
		{"enqueue", func(d string) []string { return []string{"--dsn", d, "enqueue", "-q", "secrets", "payload"} }},
		{"stats", func(d string) []string { return []string{"--dsn", d, "stats"} }},
		{"check", func(d string) []string { return []string{"--dsn", d, "check"} }},
		{"work", func(d string) []string {
			return []string{"--dsn", d, "work", "-q", "secrets", "--wait-for-db", "700ms", "--", "true"}
		}},
		{"ui", func(d string) []string { return []string{"--dsn", d, "ui", "--listen", "127.0.0.1:0"} }},
		{"move --from", func(d string) []string { return []string{"move", "--from", d, "--to", good} }},
		{"move --to", func(d string) []string { return []string{"move", "--from", good, "--to", d} }},
	}
	stderr := captureStderr(t)
	retried := false
	for _, c := range badDSNCases(t) {
		for _, cmd := range commands {
			args := append(cmd.args(c.dsn), "--verbose")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			out, err := dbqCmd(ctx, "", args...)
			cancel()
			logged := stderr()
			what := c.name + " (" + c.pw + "), dbq " + cmd.name
			if err == nil {
				t.Errorf("%s succeeded:\n%s", what, out)
				continue
			}
			line := errorLine(err)
			for name, s := range map[string]string{"stdout": out, "stderr": logged, "error": line} {
				for _, p := range passwordPieces(c.pw) {
					if strings.Contains(s, p) {
						t.Errorf("%s: its %s holds %q of the password:\n%s", what, name, p, s)
					}
				}
			}
			for _, want := range c.cause {
				// check reports in its table, the others in the error.
				if !strings.Contains(line, want) && !(cmd.name == "check" && strings.Contains(out, want)) {
					t.Errorf("%s: %q does not name the cause %q (stdout %q)", what, line, want, out)
				}
			}
			if cmd.name == "work" && strings.Contains(logged, "waiting for it") {
				retried = true
				if !strings.Contains(logged, "xxxxx@") {
					t.Errorf("%s: the retry log does not show the masked DSN:\n%s", what, logged)
				}
			}
		}
	}
	if !retried {
		t.Error("no `work --wait-for-db` logged a retry: the retry log went untested")
	}
}

// TestErrorLineOnePrefix: every command's error prints with one "dbq:"
// prefix, also where a package's message carries its own (move's
// sentinels once printed "dbq: dbq move: …").
func TestErrorLineOnePrefix(t *testing.T) {
	dir := t.TempDir()
	good := "sqlite:" + filepath.Join(dir, "good.db")
	mustRun(t, "", "--dsn", good, "migrate", "up")
	missing := "sqlite:" + filepath.Join(dir, "missing.db")
	for _, args := range [][]string{
		{"move", "--from", good, "--to", missing},
		{"move", "--from", good, "--to", good},
		{"move", "--from", missing, "--to", good},
		{"move", "--from", "pg://u:p@h/db", "--to", good},
		{"move", "--from", good, "--to", "mysql://root@tcp(h:3306)/db"},
		{"--dsn", "postgres://u:a@b@h/db", "stats"},
		{"--dsn", missing, "stats"},
		{"--dsn", good, "enqueue", "-q", "bad queue", "x"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := dbqCmd(ctx, "", args...)
		cancel()
		if err == nil {
			t.Errorf("dbq %s succeeded", strings.Join(args, " "))
			continue
		}
		line := errorLine(err)
		if !strings.HasPrefix(line, "dbq: ") || strings.Count(line, "dbq:") != 1 || strings.Contains(line, "dbq move") {
			t.Errorf("dbq %s prints %q, want one dbq: prefix", strings.Join(args, " "), line)
		}
	}
}
