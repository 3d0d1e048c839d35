package dialect_test

// Fuzz targets for the code that reads DSNs, which come from users, config
// files and environment variables. Their seed corpora run with plain
// `go test`; `go test -fuzz FuzzX ./dialect` explores further.
//
// The drivers' own DSN parsers serve as oracles for what the password of a
// DSN is: whatever pgx, go-sql-driver/mysql or go-mssqldb would send as the
// password must not survive Redact. (The tests import the drivers; package
// dialect itself still imports none.)

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dbqueue/dbq/dialect"
	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/microsoft/go-mssqldb/msdsn"
)

// refPassword is the password the fuzzed one is compared with: Redact's
// output must not depend on which of the two a DSN holds.
const refPassword = "hunter2"

// dsnForm writes a DSN with password pw in one of the forms users write,
// encoded as that form and its driver require. ok is false when the form
// cannot carry pw.
type dsnForm struct {
	name  string
	build func(pw string) (dsn string, ok bool)
}

var dsnForms = []dsnForm{
	{"url escaped", func(pw string) (string, bool) {
		return "postgres://" + url.UserPassword("app", pw).String() + "@db.example:5432/jobs?sslmode=disable", true
	}},
	{"mysql url escaped", func(pw string) (string, bool) {
		return "mysql://" + url.UserPassword("app", pw).String() + "@db.example:3306/jobs?parseTime=true", true
	}},
	{"sqlserver url escaped", func(pw string) (string, bool) {
		return "sqlserver://" + url.UserPassword("sa", pw).String() + "@db.example:1433?database=jobs", true
	}},
	// As typed by hand: only a password that needs no escaping. (One with
	// an '@', or a character that ends the host, is refused: pgx and
	// net/url would read it differently.)
	{"url as typed", func(pw string) (string, bool) {
		dsn := "postgresql://app:" + pw + "@db.example/jobs"
		if _, err := url.Parse(dsn); err != nil || strings.ContainsAny(pw, "@/?#%") {
			return "", false
		}
		return dsn, true
	}},
	// go-sql-driver/mysql takes the password up to the last '@' before the
	// last '/': any character will do.
	{"mysql driver form", func(pw string) (string, bool) {
		return "app:" + pw + "@tcp(db.example:3306)/jobs?parseTime=true", true
	}},
	// libpq keyword/value: bare, or single-quoted with \' and \\.
	{"libpq keyword/value", func(pw string) (string, bool) {
		return "host=db.example user=app password=" + libpqValue(pw) + " dbname=jobs", true
	}},
	{"libpq keyword/value, spaced", func(pw string) (string, bool) {
		return "host = db.example password = " + libpqValue(pw) + " user = app", true
	}},
	// ADO: values run to ';' and are trimmed; double quotes (with "")
	// carry anything else.
	{"ado", func(pw string) (string, bool) {
		return "server=db.example;user id=sa;Password=" + adoValue(pw) + ";database=jobs", true
	}},
	{"ado, spaced, pwd", func(pw string) (string, bool) {
		return "server=db.example; user id = sa; PWD = " + adoValue(pw) + " ; database=jobs", true
	}},
	// ODBC: braced values, with }} for }.
	{"odbc", func(pw string) (string, bool) {
		return "odbc:server=db.example;uid=sa;pwd={" + strings.ReplaceAll(pw, "}", "}}") + "};database=jobs", true
	}},
	{"url query parameter", func(pw string) (string, bool) {
		return "sqlserver://db.example:1433?database=jobs&password=" + url.QueryEscape(pw) + "&user+id=sa", true
	}},
}

func libpqValue(pw string) string {
	if pw != "" && !strings.ContainsAny(pw, " \t\n\r\v\f'\\") {
		return pw
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw) + "'"
}

func adoValue(pw string) string {
	if pw != "" && !strings.ContainsAny(pw, `;"`) && strings.TrimSpace(pw) == pw {
		return pw
	}
	return `"` + strings.ReplaceAll(pw, `"`, `""`) + `"`
}

// FuzzRedactForms: in every form, Redact's output is the same whatever the
// password is — no byte of it survives — and ParseDSN's result and errors
// hold no password either.
func FuzzRedactForms(f *testing.F) {
	for _, pw := range []string{
		"s3cret", "p@ss@word", "pa:ss", "a b c", "it's", `back\slash`, `q"uo"te`, "semi;colon", "br{ac}es",
		"amp&er=sand", "unicode-ü€😀", "pass word=x", " padded ", "%41%zz", "x\x00y", "\xff\xfe", "xxxxx",
		"@", "tcp(evil)/", "secret'; DROP TABLE x; --", `"00`, "//", "//x:y", "password=pw", "//@#", "//:@#",
	} {
		f.Add(pw)
	}
	f.Fuzz(func(t *testing.T, pw string) {
		if pw == "" || !utf8.ValidString(pw) || strings.ContainsFunc(pw, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return // no driver takes such a password in a DSN string
		}
		for _, form := range dsnForms {
			dsn, ok := form.build(pw)
			if !ok {
				continue
			}
			ref, _ := form.build(refPassword)
			got, want := dialect.Redact(dsn), dialect.Redact(ref)
			if got != want {
				t.Errorf("%s: Redact(%q)\n = %q\nbut with password %q it is %q: the output depends on the password",
					form.name, dsn, got, refPassword, want)
			}
			_, err := dialect.ParseDSN(dsn)
			_, errRef := dialect.ParseDSN(ref)
			if err != nil && errRef != nil && err.Error() != errRef.Error() {
				t.Errorf("%s: ParseDSN(%q) error %q depends on the password (with %q: %q)", form.name, dsn, err, refPassword, errRef)
			}
			if err != nil && leaks(err.Error(), parseErr, dsn, pw) {
				t.Errorf("%s: ParseDSN(%q) error holds the password: %v", form.name, dsn, err)
			}
		}
	})
}

// FuzzRedactDriverOracle: for any string, ParseDSN and Redact do not
// panic, and a password that pgx, go-sql-driver/mysql, go-mssqldb or
// net/url would read from it appears neither in Redact's output nor in
// ParseDSN's error or result.
func FuzzRedactDriverOracle(f *testing.F) {
	for _, s := range []string{
		"postgres://u:s3cret@h:5432/db", "postgresql://u:s3cret@/db?host=/tmp", "mysql://root:s3cret@h/db",
		"root:s3cret@tcp(h:3306)/db", "root:s3c@ret@unix(/tmp/x.sock)/db", "sqlserver://sa:s3cret@h?database=x",
		"host=h password=s3cret dbname=d", "host=h password = s3cret", "host=h password='s3 cret'",
		"server=h;user id=sa;password=s3 cret;database=x", `server=h;password="s3;cret"`, "odbc:server=h;pwd={s3;cret}",
		"sqlserver://h?password=s3cret", "PASSWORD=s3cret", "x:y@", ":@", "@:", "mysql://[::1]:3306/db",
		"mysql://u:p%zzq@h/db", "postgres://u:pa/ss@h/db", "sqlite:/tmp/a:b@c", "", ":", "\x00",
		"/:000@/", "A://0@/00", "sqlite:000@/", "host=h password=a;b dbname=d", "password=ab;cd",
		// Found by fuzzing.
		"password=;00", ":000@ (0)/", "mYsql://:000@//", "password=;0=", ":000@)(0)/", "//:@#0@/", ":000@/(0)/",
		"odbc:000@/", "u:secret@tcp(host:3306", "pAssword\v=000", "pwd\u00a0=\u2003s3cret", "password=abc;database=x",
		"password=a;b host=h",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		red := dialect.Redact(s)
		_, err := dialect.ParseDSN(s)
		for oracle, pw := range passwordsIn(s) {
			if leaks(red, dialect.Redact, s, pw) {
				t.Errorf("Redact(%q) = %q keeps the password %q that %s reads", s, red, pw, oracle)
			}
			if err != nil && leaks(err.Error(), parseErr, s, pw) {
				t.Errorf("ParseDSN(%q) error %q holds the password %q that %s reads", s, err, pw, oracle)
			}
		}
		if err != nil && !errors.Is(err, dialect.ErrUnknownScheme) && !strings.HasPrefix(err.Error(), "dbq:") {
			t.Errorf("ParseDSN(%q) error %q lacks the dbq: prefix", s, err)
		}
	})
}

// passwordsIn returns, per parser, the password it reads from s.
func passwordsIn(s string) map[string]string {
	out := map[string]string{}
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			out["net/url"] = p
		}
	}
	// A string that parses as a URL with an authority or user info is
	// read as one, as Redact documents: to the MySQL driver
	// "postgres://u@/db" has user "postgres" and password "//u", and Redact
	// does not mask that.
	if u, err := url.Parse(s); err != nil || u.User == nil && (u.Scheme == "" || !strings.HasPrefix(strings.ToLower(s), u.Scheme+"://")) {
		if c, err := mysqldrv.ParseDSN(s); err == nil {
			out["go-sql-driver/mysql"] = c.Passwd
		}
	}
	// pgconn also reads PGPASSWORD and .pgpass; leaks only counts passwords
	// that are in s.
	if c, err := pgconn.ParseConfig(s); err == nil {
		out["pgx"] = c.Password
	}
	if c, err := msdsn.Parse(s); err == nil {
		out["go-mssqldb"] = c.Password
	}
	return out
}

// leaks reports whether out, which is show(dsn), holds the password pw of
// dsn. Only a password that dsn spells out once counts, and not one that
// show spells out anyway, the password gone or masked: fixed text, or the
// text around a mask.
func leaks(out string, show func(string) string, dsn, pw string) bool {
	if len(pw) < 3 || strings.Count(dsn, pw) != 1 || !strings.Contains(out, pw) {
		return false
	}
	for _, other := range []string{"", "xxxxx", "hunter2"} {
		if strings.Contains(show(strings.Replace(dsn, pw, other, 1)), pw) {
			return false
		}
	}
	return true
}

func parseErr(s string) string {
	_, err := dialect.ParseDSN(s)
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzValidateQueueTyped: every queue name is accepted or refused with
// ErrInvalidQueue; an accepted one is 1 to MaxQueueLen bytes of
// [A-Za-z0-9_.:-], so it holds no quote, comment or statement separator.
func FuzzValidateQueueTyped(f *testing.F) {
	for _, s := range []string{"default", "a.b:c-d_e", "", "x'--", "q;DROP TABLE dbq_jobs", "q/*c*/", "ünï", "q\x00", "q\n", strings.Repeat("q", 65)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := dialect.ValidateQueue(s)
		if err != nil {
			if !errors.Is(err, dialect.ErrInvalidQueue) {
				t.Fatalf("ValidateQueue(%q) = %v, not ErrInvalidQueue", s, err)
			}
			return
		}
		if s == "" || len(s) > dialect.MaxQueueLen {
			t.Fatalf("ValidateQueue accepted %d bytes", len(s))
		}
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_.:-", c) >= 0) {
				t.Fatalf("ValidateQueue accepted %q with byte %q", s, c)
			}
		}
	})
}

// FuzzIdentifierQuoting: a schema or prefix is accepted or refused with
// ErrInvalidIdentifier; an accepted one quotes to exactly the identifier
// between one pair of quotes on every dialect, and qualified names hold
// exactly the quotes and dot they should. Quote, given anything at all,
// yields one quoted identifier that unquotes to its input.
func FuzzIdentifierQuoting(f *testing.F) {
	for _, s := range [][2]string{
		{"", "dbq_"}, {"app", "q_"}, {`a"b`, "p_"}, {"s", "x`y"}, {"s", "x]y"}, {"s -- c", "p"},
		{"s", "p;DROP TABLE t"}, {"über", "p"}, {"s", "p/*"}, {"1s", "p"}, {"s\x00", "p"},
	} {
		f.Add(s[0], s[1])
	}
	quotes := map[dialect.Name][2]string{
		dialect.Postgres: {`"`, `"`}, dialect.SQLite: {`"`, `"`}, dialect.MySQL: {"`", "`"}, dialect.MSSQL: {"[", "]"},
	}
	f.Fuzz(func(t *testing.T, schema, prefix string) {
		for d, q := range quotes {
			for _, s := range []string{schema, prefix} {
				got := dialect.Quote(d, s)
				if back, ok := unquote(got, q[0], q[1]); !ok || back != s {
					t.Fatalf("Quote(%s, %q) = %s, which does not read back as one identifier", d, s, got)
				}
			}
		}
		n := dialect.Names{Schema: schema, Prefix: prefix}
		err := n.Validate()
		if err != nil {
			if !errors.Is(err, dialect.ErrInvalidIdentifier) {
				t.Fatalf("%+v: %v, not ErrInvalidIdentifier", n, err)
			}
			return
		}
		for _, s := range []string{schema, n.WithDefaults().Prefix} {
			if s != "" && (!validIdent(s) || len(s) > 63) {
				t.Fatalf("%+v accepted, but %q is not a plain identifier", n, s)
			}
		}
		for d, q := range quotes {
			table := n.Qualified(d, n.Jobs())
			want := q[0] + n.Jobs() + q[1]
			if schema != "" && d != dialect.SQLite {
				want = q[0] + schema + q[1] + "." + want
			}
			if table != want {
				t.Fatalf("%s: Qualified = %s, want %s", d, table, want)
			}
		}
	})
}

func validIdent(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// unquote reads one quoted identifier that must fill q, with the closing
// quote doubled inside, as the SQL dialects read it.
func unquote(q, open, close string) (string, bool) {
	if !strings.HasPrefix(q, open) || !strings.HasSuffix(q, close) || len(q) < len(open)+len(close) {
		return "", false
	}
	inner := q[len(open) : len(q)-len(close)]
	var b strings.Builder
	for i := 0; i < len(inner); i++ {
		if strings.HasPrefix(inner[i:], close) {
			if !strings.HasPrefix(inner[i+len(close):], close) {
				return "", false // the identifier would end here
			}
			i += len(close)
		}
		b.WriteByte(inner[i])
	}
	return b.String(), true
}

// formDialect is the dialect each form of dsnForms names.
var formDialect = map[string]dialect.Name{
	"url escaped": dialect.Postgres, "mysql url escaped": dialect.MySQL, "sqlserver url escaped": dialect.MSSQL,
	"url as typed": dialect.Postgres, "mysql driver form": dialect.MySQL, "libpq keyword/value": dialect.Postgres,
	"libpq keyword/value, spaced": dialect.Postgres, "ado": dialect.MSSQL, "ado, spaced, pwd": dialect.MSSQL,
	"odbc": dialect.MSSQL,
}

// FuzzParseDSNDetectsForms: whatever the password, ParseDSN picks the
// dialect of every form its driver reads, URL and native alike, and hands
// the driver a string its parser accepts.
func FuzzParseDSNDetectsForms(f *testing.F) {
	for _, pw := range []string{
		"s3cret", "p@ss@word", "pa:ss", "a b c", "semi;colon", "tcp(evil)/", "host=h", "server=x;", `q"uo"te`,
		"it's", "x/y", "@tcp(h)/db", "user id=sa;server=h", "//", "password=pw", " padded ",
	} {
		f.Add(pw)
	}
	f.Fuzz(func(t *testing.T, pw string) {
		if pw == "" || !utf8.ValidString(pw) || strings.ContainsFunc(pw, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return
		}
		for _, form := range dsnForms {
			want, ok := formDialect[form.name]
			if !ok {
				continue
			}
			dsn, ok := form.build(pw)
			if !ok {
				continue
			}
			d, err := dialect.ParseDSN(dsn)
			if err != nil {
				t.Errorf("%s: ParseDSN(%q): %v", form.name, dsn, err)
				continue
			}
			if d != want {
				t.Errorf("%s: ParseDSN(%q) picked %s, want %s", form.name, dsn, d, want)
				continue
			}
			// The dialect's driver reads its own forms as they are (the
			// mysql dialect turns a mysql:// URL into its driver's form:
			// tested there).
			switch {
			case want == dialect.MySQL && !strings.HasPrefix(dsn, "mysql:"):
				_, err = mysqldrv.ParseDSN(dsn)
			case want == dialect.Postgres:
				_, err = pgconn.ParseConfig(dsn)
			case want == dialect.MSSQL:
				_, err = msdsn.Parse(dsn)
			}
			if err != nil && form.name != "url as typed" { // pgx wants a URL escaped
				t.Errorf("%s: the %s driver refuses %q: %v", form.name, want, dsn, err)
			}
		}
	})
}
