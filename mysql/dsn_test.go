package mysql

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/dbqueue/dbq/queue"
	mysqldrv "github.com/go-sql-driver/mysql"
)

// These tests need no server.

// The mysql:// URL becomes the driver's own form, which stays as it is;
// the cases are those dialect.ParseDSN had for MySQL.
func TestDriverForm(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"mysql://root@127.0.0.1:3306/test", "root@tcp(127.0.0.1:3306)/test"},
		{"mysql://u:p%40ss@db/app?parseTime=true", "u:p@ss@tcp(db:3306)/app?parseTime=true"},
		{"mysql:///test", "tcp(127.0.0.1:3306)/test"},
		{"mysql://[::1]:3306/db", "tcp([::1]:3306)/db"},
		{"mysql://[::1]/db", "tcp([::1]:3306)/db"},
		{"mysql://u:@h/db", "u:@tcp(h:3306)/db"},
		{"MYSQL://u@db/app", "u@tcp(db:3306)/app"},
		{"root@tcp(127.0.0.1:3306)/test", "root@tcp(127.0.0.1:3306)/test"},
		{"app:p@ss:w/rd@tcp(db:3306)/jobs?parseTime=true", "app:p@ss:w/rd@tcp(db:3306)/jobs?parseTime=true"},
		{"root@/test", "root@/test"},
		{"root@unix(/run/mysqld/mysqld.sock)/test", "root@unix(/run/mysqld/mysqld.sock)/test"},
		{"tcp(localhost:3306)/test", "tcp(localhost:3306)/test"},
	} {
		got, err := driverForm(c.in)
		if err != nil || got != c.want {
			t.Errorf("driverForm(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// Both forms parse, in one step, to the same driver config with the
// dialect's options; bad DSNs are ErrInvalidConfig without the password.
func TestDriverConfig(t *testing.T) {
	for _, c := range []struct{ in, addr, db, user, pass, sqlMode string }{
		{"mysql://u:p%40ss@db.example:3307/app?sql_mode=TRADITIONAL", "db.example:3307", "app", "u", "p@ss", "TRADITIONAL"},
		{"u:p@ss@tcp(db.example:3307)/app?sql_mode=TRADITIONAL", "db.example:3307", "app", "u", "p@ss", "TRADITIONAL"},
		{"mysql://root@/test", "127.0.0.1:3306", "test", "root", "", ""},
		{"root@tcp(127.0.0.1:3306)/test", "127.0.0.1:3306", "test", "root", "", ""},
		{"root@unix(/run/mysqld/mysqld.sock)/test", "/run/mysqld/mysqld.sock", "test", "root", "", ""},
	} {
		mc, _, err := driverConfig(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if mc.Addr != c.addr || mc.DBName != c.db || mc.User != c.user || mc.Passwd != c.pass ||
			mc.Params["sql_mode"] != c.sqlMode || !mc.ParseTime || !mc.RejectReadOnly || !mc.InterpolateParams {
			t.Errorf("%s: %+v", c.in, mc)
		}
	}
	for _, in := range []string{
		"mysql://u:s3cret%zz@h/db",       // bad escape in the URL
		"u:s3cret@tcp(host:3306",         // unclosed address
		"mysql://u:s3cret@h/db?x=%zz",    // bad query escape
		"u:s3cret@tcp(h)/db?loc=Nowhere", // the driver refuses the value
	} {
		_, _, err := driverConfig(in)
		if !errors.Is(err, queue.ErrInvalidConfig) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("driverConfig(%q): %v", in, err)
		}
	}
}

// FuzzDriverConfig: whatever the password of a mysql:// URL, a DSN that
// parses gives the driver that password, and an error never holds it.
func FuzzDriverConfig(f *testing.F) {
	for _, pw := range []string{"hunter2", "p@ss:w/rd", "a%b", "sp ace", "ü"} {
		f.Add(pw)
	}
	f.Fuzz(func(t *testing.T, pw string) {
		if len(pw) < 4 {
			return // too short to tell apart from the rest of the DSN
		}
		dsn := "mysql://" + url.UserPassword("app", pw).String() + "@db.example:3306/jobs"
		mc, _, err := driverConfig(dsn)
		if err != nil {
			if strings.Contains(err.Error(), pw) {
				t.Fatalf("driverConfig(%q): error holds the password: %v", dsn, err)
			}
			return
		}
		want, derr := mysqldrv.ParseDSN("app:" + pw + "@tcp(x)/")
		if derr == nil && mc.Passwd != want.Passwd {
			t.Fatalf("driverConfig(%q): password %q, want %q", dsn, mc.Passwd, want.Passwd)
		}
	})
}
