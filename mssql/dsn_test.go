package mssql

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

func TestParseDSN(t *testing.T) {
	for _, tc := range []struct {
		dsn, host, user, password, database string
	}{
		{"sqlserver://sa:s3cret@db.example:1433?database=jobs", "db.example", "sa", "s3cret", "jobs"},
		{"sqlserver://" + url.UserPassword("sa", "p@ss;w=rd").String() + "@h/inst?database=d", "h", "sa", "p@ss;w=rd", "d"},
		{"server=db.example;user id=sa;password=s3cret;database=jobs", "db.example", "sa", "s3cret", "jobs"},
		{"Data Source=h,1433;User ID=sa;Password=\"a;b\";Initial Catalog=d", "h", "sa", "a;b", "d"},
		{"address=h;user id=sa;password=x", "h", "sa", "x", ""},
		{"odbc:server=h;user id=sa;password={a;b}};c};database=d", "h", "sa", "a;b};c", "d"},
	} {
		c, _, err := parseDSN(tc.dsn)
		if err != nil {
			t.Errorf("parseDSN(%q): %v", tc.dsn, err)
			continue
		}
		if c.Host != tc.host || c.User != tc.user || c.Password != tc.password || c.Database != tc.database {
			t.Errorf("parseDSN(%q) = host %q user %q password %q database %q", tc.dsn, c.Host, c.User, c.Password, c.Database)
		}
	}
	for _, dsn := range []string{"postgres://u:p@h/db", "mysql://u:p@h/db", "u:p@tcp(h:3306)/db",
		"host=h user=u password=p dbname=d", "nonsense", "", "user id=sa;password=p"} {
		_, _, err := parseDSN(dsn)
		if !errors.Is(err, queue.ErrUnknownScheme) {
			t.Errorf("parseDSN(%q): %v, want ErrUnknownScheme", dsn, err)
		}
		if err != nil && strings.Contains(err.Error(), "p@") {
			t.Errorf("parseDSN(%q): %v holds the DSN", dsn, err)
		}
	}
	for _, dsn := range []string{"sqlserver://sa:s3cret@h:notaport", "sqlserver://sa:s3cret@h?encrypt=maybe",
		"server=h;password=s3cret;port=x", "odbc:server=h;password={s3cret"} {
		_, _, err := parseDSN(dsn)
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.HasPrefix(err.Error(), "dbq: ") {
			t.Errorf("parseDSN(%q): %v", dsn, err)
		}
	}
}

// Whatever the password, parseDSN's error does not hold it.
func FuzzParseDSN(f *testing.F) {
	for _, pw := range []string{"s3cret", "a;b", "{x}}", "p@ss/w:rd", "\"q\"", " spaced "} {
		f.Add(pw)
	}
	forms := []func(string) string{
		func(pw string) string { return "sqlserver://sa:" + pw + "@h:1433?database=d" },
		func(pw string) string { return "sqlserver://" + url.UserPassword("sa", pw).String() + "@h:x" },
		func(pw string) string { return "server=h;user id=sa;password=" + pw + ";port=x" },
		func(pw string) string { return "odbc:server=h;user id=sa;pwd=" + pw + ";port=x" },
	}
	f.Fuzz(func(t *testing.T, pw string) {
		if len(pw) < 4 {
			return
		}
		for _, form := range forms {
			dsn := form(pw)
			if strings.Contains(form(""), pw) {
				continue
			}
			if _, _, err := parseDSN(dsn); err != nil && strings.Contains(err.Error(), pw) {
				t.Errorf("parseDSN(%q): %v", dsn, err)
			}
		}
	})
}

func TestParseStrategy(t *testing.T) {
	for in, want := range map[string]Strategy{
		"": DeleteTop, "deletetop": DeleteTop, "DeleteTop": DeleteTop, "delete-top": DeleteTop, "DELETE_TOP": DeleteTop,
		"updlock": UpdLock, "UpdLock": UpdLock, "upd-lock": UpdLock, "upd_lock": UpdLock,
	} {
		if got, err := ParseStrategy(in); got != want || err != nil {
			t.Errorf("ParseStrategy(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"skiplocked", "advisory", "delete top", "updlock2"} {
		_, err := ParseStrategy(in)
		if !errors.Is(err, queue.ErrInvalidConfig) || !strings.Contains(err.Error(), "deletetop") || !strings.Contains(err.Error(), "updlock") {
			t.Errorf("ParseStrategy(%q): %v", in, err)
		}
	}
	for _, s := range []Strategy{DeleteTop, UpdLock} {
		if got, err := ParseStrategy(s.String()); got != s || err != nil {
			t.Errorf("ParseStrategy(%v.String()) = %v, %v", s, got, err)
		}
	}
}

// Server-free: a sqlserver:// URL whose password holds an unescaped @ ? #
// or / is refused before go-mssqldb reads it, and a connection refused
// with the password escaped says so; neither message holds a piece of the
// password.
func TestDSNPasswordNotShown(t *testing.T) {
	for _, pw := range []string{"Wr@ng-Secret-9", "Se/cret#Pw?9", "Kq3v@Frag2x?Frag3y#Frag4z/Frag5w:Frag6v"} {
		pieces := []string{pw, url.QueryEscape(pw)}
		for _, p := range strings.FieldsFunc(pw, func(r rune) bool { return strings.ContainsRune("@?#/:", r) }) {
			if len(p) >= 3 {
				pieces = append(pieces, p)
			}
		}
		shows := func(err error) bool {
			for _, p := range pieces {
				if strings.Contains(err.Error(), p) {
					return true
				}
			}
			return false
		}
		dsn := "sqlserver://sa:" + pw + "@127.0.0.1:1?database=master"
		if _, _, err := parseDSN(dsn); !errors.Is(err, queue.ErrBadDSN) || shows(err) || !strings.Contains(err.Error(), "%40 for @") {
			t.Errorf("parseDSN(%q) = %v, want ErrBadDSN naming the escapes", dsn, err)
		}
		if _, err := OpenDB(dsn); !errors.Is(err, queue.ErrInvalidConfig) || shows(err) {
			t.Errorf("OpenDB(%q) = %v", dsn, err)
		}
		dsn = "sqlserver://" + url.UserPassword("sa", pw).String() + "@127.0.0.1:1?database=master&dial+timeout=5"
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		q, err := Open(ctx, dsn, Config{})
		cancel()
		if q != nil {
			q.Close()
		}
		var ce *dialect.ConnectError
		if !errors.As(err, &ce) || shows(err) || !strings.Contains(err.Error(), "connection refused") ||
			!strings.Contains(err.Error(), "sqlserver://sa:xxxxx@127.0.0.1:1") {
			t.Errorf("Open(%q) = %v, want a ConnectError saying connection refused", dsn, err)
		}
	}
}
