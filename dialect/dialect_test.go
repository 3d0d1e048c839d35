package dialect

import (
	"errors"
	"strings"
	"testing"
	"unicode"
)

func TestParseDSN(t *testing.T) {
	for _, tc := range []struct {
		in      string
		dialect Name
	}{
		{"postgres://u:p@h:5432/db?sslmode=disable", Postgres},
		{"postgresql://h/db", Postgres},
		{"mysql://root@127.0.0.1:3306/test", MySQL},
		{"mysql://u:p%40ss@db/app?parseTime=true", MySQL},
		{"mysql:///test", MySQL},
		{"sqlserver://sa:x@h:1433?database=master", MSSQL},
		{"sqlite:dbq.db", SQLite},
		{"sqlite://rel/path.db", SQLite},
		{"sqlite:///abs/path.db", SQLite},
		{"sqlite::memory:", SQLite},
		// The drivers' own forms.
		{"root@tcp(127.0.0.1:3306)/test", MySQL},
		{"app:p@ss:w/rd@tcp(db:3306)/jobs?parseTime=true", MySQL},
		{"root@/test", MySQL},
		{"root@unix(/run/mysqld/mysqld.sock)/test", MySQL},
		{"tcp(localhost:3306)/test", MySQL},
		{"postgres:pw@tcp(h)/db", MySQL}, // a user named postgres
		{"host=127.0.0.1 port=5432 user=postgres dbname=test sslmode=disable", Postgres},
		{"dbname=test", Postgres},
		{"host=h password='a b;server=x' dbname=d", Postgres},
		{"host=h password=a;server=x", Postgres},
		{"server=127.0.0.1;user id=sa;password=x;database=master", MSSQL},
		{"Data Source=h,1433;Initial Catalog=db;User ID=sa;Password=\"a;b\"", MSSQL},
		{"password=x;server=h", MSSQL},
		{"odbc:server=h;user id=sa;pwd={a;b}", MSSQL},
	} {
		got, err := ParseDSN(tc.in)
		if err != nil {
			t.Errorf("ParseDSN(%q): %v", tc.in, err)
			continue
		}
		if got != tc.dialect {
			t.Errorf("ParseDSN(%q) = %s, want %s", tc.in, got, tc.dialect)
		}
	}
}

func TestParseDSNRejects(t *testing.T) {
	for _, in := range []string{"", "oracle://u:secret@h/db", "nocolon", "redis://:secret@h",
		// Not a driver's own form either.
		"/abs/path.db", "u:secret@h/db", "u:secret@host(x)/db", "foo=bar", "application_name=x",
		"user id=sa;password=secret", "host=", "dbname"} {
		_, err := ParseDSN(in)
		if err == nil {
			t.Errorf("ParseDSN(%q) accepted", in)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseDSN(%q) error leaks the password: %v", in, err)
		}
	}
	if _, err := ParseDSN("oracle://h"); !errors.Is(err, ErrUnknownScheme) {
		t.Errorf("unknown scheme: %v, want ErrUnknownScheme", err)
	}
}

func TestRedact(t *testing.T) {
	for _, in := range []string{
		"postgres://user:s3cret@host:5432/db",
		"mysql://root:s3cret@h:3306/db",
		"root:s3cret@tcp(127.0.0.1:3306)/test",
		"sqlserver://sa:s3cret@h:1433?database=master",
		"host=h user=u password=s3cret dbname=d",
		"server=h;user id=sa;password=s3cret;database=x",
		"sqlserver://h?password=s3cret&user=sa",
		"postgres://user:s3cret@host:5432/db?pwd=s3cret",
	} {
		out := Redact(in)
		if strings.Contains(out, "s3cret") {
			t.Errorf("Redact(%q) = %q", in, out)
		}
	}
	if got := Redact("postgres://u@h/db"); got != "postgres://u@h/db" {
		t.Errorf("Redact changed a DSN without a password: %q", got)
	}
}

func TestValidateQueue(t *testing.T) {
	for _, ok := range []string{"a", "default", "emails.high", "tenant-1:jobs", strings.Repeat("x", MaxQueueLen)} {
		if err := ValidateQueue(ok); err != nil {
			t.Errorf("ValidateQueue(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", " ", "a b", "q'", `q"`, "q;", "é", "q\x00", strings.Repeat("x", MaxQueueLen+1)} {
		if err := ValidateQueue(bad); !errors.Is(err, ErrInvalidQueue) {
			t.Errorf("ValidateQueue(%q) = %v", bad, err)
		}
	}
}

func TestNamesAndQuoting(t *testing.T) {
	n := Names{Schema: "app", Prefix: "q_"}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	want := map[Name]string{
		Postgres: `"app"."q_jobs"`,
		MySQL:    "`app`.`q_jobs`",
		MSSQL:    "[app].[q_jobs]",
		SQLite:   `"q_jobs"`,
	}
	for d, w := range want {
		if got := n.Qualified(d, n.Jobs()); got != w {
			t.Errorf("%s: %s, want %s", d, got, w)
		}
	}
	if got := (Names{}).Jobs(); got != "dbq_jobs" {
		t.Errorf("default jobs table %q", got)
	}
	// Quote still neutralises a closing quote should one slip through.
	for d, w := range map[Name]string{Postgres: `"a""b"`, MySQL: "`a``b`", MSSQL: "[a]]b]"} {
		in := map[Name]string{Postgres: `a"b`, MySQL: "a`b", MSSQL: "a]b"}[d]
		if got := Quote(d, in); got != w {
			t.Errorf("Quote(%s, %q) = %s, want %s", d, in, got, w)
		}
	}
	for _, bad := range []Names{
		{Prefix: "x;drop"}, {Prefix: `x"`}, {Schema: "a.b"}, {Schema: "1abc"}, {Prefix: strings.Repeat("p", MaxPrefixLen+1)},
		{Prefix: "über_"}, {Schema: "s -- c"},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidIdentifier) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{"postgres://u:p@h/db", "mysql://u:p@h:1/d?x=y", "sqlite:a.db", "sqlserver://u:p@h", "x", ":", "mysql://[::1]:3306/db"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDSN(s)
		if err != nil {
			return
		}
		switch d {
		case Postgres, MySQL, MSSQL, SQLite:
		default:
			t.Fatalf("ParseDSN(%q) gave dialect %q", s, d)
		}
	})
}

func FuzzRedact(f *testing.F) {
	for _, s := range []string{"postgres://u:pw@h/db", "u:pw@tcp(h)/d", "password=pw", "sqlserver://u:pw@h?x=1"} {
		f.Add(s, "pw")
	}
	f.Fuzz(func(t *testing.T, prefix, pw string) {
		if len(pw) < 4 || strings.ContainsAny(pw, "@/:?#&;=%[]") || strings.IndexFunc(pw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			return
		}
		for _, form := range []string{
			"postgres://user:" + pw + "@host/db",
			"user:" + pw + "@tcp(host:3306)/db",
			"host=h password=" + pw + " user=u",
		} {
			if out := Redact(form); strings.Contains(out, pw) {
				t.Fatalf("Redact(%q) = %q keeps the password", form, out)
			}
		}
	})
}

func FuzzValidateQueue(f *testing.F) {
	for _, s := range []string{"default", "a.b:c-d", "", "a'b", "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidateQueue(s) != nil {
			return
		}
		if len(s) == 0 || len(s) > MaxQueueLen || strings.ContainsAny(s, "'\"`;\\ \x00[]") {
			t.Fatalf("ValidateQueue accepted %q", s)
		}
	})
}

func FuzzValidateIdentifier(f *testing.F) {
	for _, s := range []string{"dbq_", "a", `a"b`, "a;b", "1a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidateIdentifier("prefix", s, 63) != nil {
			return
		}
		for _, d := range All {
			q := Quote(d, s)
			if strings.Count(q, `"`)+strings.Count(q, "`")+strings.Count(q, "[")+strings.Count(q, "]") != 2 {
				t.Fatalf("valid identifier %q quotes to %s", s, q)
			}
		}
	})
}
