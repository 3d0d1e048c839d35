package dialect

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
)

// secretPasswords hold each character a URL must escape in its user
// info, between pieces long enough to be told apart from the rest of a
// DSN.
var secretPasswords = []string{
	"Wr@ng-Secret-9",
	"Se/cret#Pw?9",
	"Kq3v@Frag2x?Frag3y#Frag4z/Frag5w:Frag6v",
}

// pieces returns pw and its parts between @ ? # / : of three bytes or
// more: none may appear in a message.
func pieces(pw string) []string {
	out := []string{pw, url.QueryEscape(pw), url.PathEscape(pw)}
	for _, p := range strings.FieldsFunc(pw, func(r rune) bool { return strings.ContainsRune("@?#/:", r) }) {
		if len(p) >= 3 {
			out = append(out, p)
		}
	}
	return out
}

func leaksPiece(t *testing.T, what, text, pw string) {
	t.Helper()
	for _, p := range pieces(pw) {
		if strings.Contains(text, p) {
			t.Errorf("%s holds %q of the password %q: %s", what, p, pw, text)
		}
	}
}

// A URL whose password holds an unescaped @ ? # or / reads differently to
// pgx (the first '@') and net/url (the last), so it is refused, on every
// URL scheme, with the escapes to use and no piece of the password.
func TestNewDSNRefusesUnescapedPassword(t *testing.T) {
	for _, scheme := range []string{"postgres", "postgresql", "mysql", "mariadb", "sqlserver"} {
		for _, pw := range secretPasswords {
			for _, tail := range []string{"@127.0.0.1:5432/db", "@h/db?sslmode=disable", "@h:1433?database=x"} {
				dsn := scheme + "://u:" + pw + tail
				_, err := NewDSN(dsn)
				var de *DSNError
				if !errors.As(err, &de) || !errors.Is(err, ErrBadDSN) || !errors.Is(err, ErrInvalidConfig) {
					t.Errorf("NewDSN(%q) = %v, want a DSNError (ErrBadDSN)", dsn, err)
					continue
				}
				if !strings.Contains(err.Error(), "the password must be URL-escaped (%40 for @, %3F for ?, %23 for #, %2F for /") {
					t.Errorf("NewDSN(%q): %v, want the escapes named", dsn, err)
				}
				leaksPiece(t, "NewDSN error", err.Error(), pw)
				leaksPiece(t, "Redact", Redact(dsn), pw)
				if strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), "u:") {
					t.Errorf("NewDSN(%q): %v quotes the DSN", dsn, err)
				}
			}
		}
	}
}

// Escaped, the same passwords parse; the DSN shows masked, built from its
// parts, and Scrub takes every spelling of the password out of a driver's
// message.
func TestNewDSNEscapedPassword(t *testing.T) {
	for _, c := range []struct {
		scheme string
		want   Name
	}{{"postgres", Postgres}, {"mysql", MySQL}, {"mariadb", MySQL}, {"sqlserver", MSSQL}} {
		for _, pw := range secretPasswords {
			esc := url.UserPassword("u", pw).String()
			dsn := c.scheme + "://" + esc + "@db.example:5432/db?sslmode=disable"
			d, err := NewDSN(dsn)
			if err != nil {
				t.Errorf("NewDSN(%q): %v", dsn, err)
				continue
			}
			if d.Dialect != c.want {
				t.Errorf("NewDSN(%q) is %s, want %s", dsn, d.Dialect, c.want)
			}
			if want := c.scheme + "://u:xxxxx@db.example:5432/db?sslmode=disable"; d.String() != want {
				t.Errorf("NewDSN(%q).String() = %q, want %q", dsn, d, want)
			}
			msg := fmt.Sprintf("cannot parse `%s`: password %q (%s) near %s; %s", dsn, pw, url.QueryEscape(pw), strings.Join(pieces(pw)[3:], ", "), esc)
			out, ok := d.Scrub(msg)
			if !ok {
				t.Errorf("Scrub dropped %q", msg)
			}
			leaksPiece(t, "Scrub", out, pw)
			if !strings.Contains(out, "db.example") {
				t.Errorf("Scrub(%q) = %q lost the host", msg, out)
			}
		}
	}
}

// A query password (sqlserver://h?password=…) and a key=value password
// are masked and scrubbed too; a password too short to replace drops the
// driver's text for the cause its type tells.
func TestDSNScrubForms(t *testing.T) {
	pw := "Kq3v@Frag2x;Frag6v"
	for _, dsn := range []string{
		"sqlserver://h:1433?database=d&password=" + url.QueryEscape(pw),
		"host=h user=u password='" + pw + "' dbname=d",
		"server=h;user id=sa;password=\"" + pw + "\";database=d",
		"u:" + pw + "@tcp(h:3306)/d",
	} {
		d, err := NewDSN(dsn)
		if err != nil {
			t.Errorf("NewDSN(%q): %v", dsn, err)
			continue
		}
		leaksPiece(t, "String", d.String(), pw)
		out, _ := d.Scrub("failed: " + dsn + " / " + pw)
		leaksPiece(t, "Scrub", out, pw)
	}
	d, err := NewDSN("postgres://u:ab@h:1/db")
	if err != nil {
		t.Fatal(err)
	}
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: "x"}}
	err = d.ConnectError(fmt.Errorf("ab was here: %w", fmt.Errorf("dial: %w %w", dial, syscall.ECONNREFUSED)))
	var ce *ConnectError
	if !errors.As(err, &ce) || strings.Contains(err.Error(), "ab was") || !strings.Contains(err.Error(), "connection refused") ||
		!errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("ConnectError with a short password in the driver's text: %v", err)
	}
	dns := &net.DNSError{Err: "no such host", Name: "nohost.invalid", IsNotFound: true}
	if got := PlainCause(fmt.Errorf("x: %w", dns)); got != "no such host nohost.invalid" {
		t.Errorf("PlainCause(dns) = %q", got)
	}
}

// A URL mixed with go-sql-driver's tcp(host) form is refused, naming both
// forms the dialect takes; an unknown scheme names the schemes dbq knows
// and quotes nothing after its "//".
func TestNewDSNMixedAndUnknown(t *testing.T) {
	for _, c := range []struct{ dsn, want1, want2 string }{
		{"mysql://root@tcp(h:3306)/db", "mysql://user:pass@host:3306/db", "user:pass@tcp(host:3306)/db"},
		{"mysql://root:Frag5w@tcp(h:3306)/db", "mysql://user:pass@host:3306/db", "user:pass@tcp(host:3306)/db"},
		{"mariadb://root:Frag5w@unix(/run/mysqld.sock)/db", "mariadb://", "user:pass@tcp(host:3306)/db"},
		{"postgres://u:Frag5w@tcp(h:5432)/db", "postgres://user:pass@host:5432/db", "host=host port=5432"},
	} {
		_, err := NewDSN(c.dsn)
		if !errors.Is(err, ErrBadDSN) || !strings.Contains(err.Error(), c.want1) || !strings.Contains(err.Error(), c.want2) ||
			strings.Contains(err.Error(), "Frag5w") || strings.Contains(err.Error(), "root") {
			t.Errorf("NewDSN(%q) = %v, want both forms named", c.dsn, err)
		}
	}
	for _, dsn := range []string{"pg://u:Frag5w@h/db", "maria://u:Frag5w@h/db", "pg:u:Frag5w@h/db"} {
		_, err := NewDSN(dsn)
		if !errors.Is(err, ErrUnknownScheme) || !errors.Is(err, ErrInvalidConfig) || strings.Contains(err.Error(), "Frag5w") ||
			!strings.Contains(err.Error(), "postgres://") || !strings.Contains(err.Error(), "mariadb://") {
			t.Errorf("NewDSN(%q) = %v, want ErrUnknownScheme naming the schemes", dsn, err)
		}
	}
	if d, err := NewDSN("mariadb://root@127.0.0.1:3306/test"); err != nil || d.Dialect != MySQL {
		t.Errorf("mariadb:// = %v, %v; want MySQL", d, err)
	}
	// An '@' in a query value is the value's.
	for _, dsn := range []string{"postgres://u@h/db?application_name=a@b", "sqlserver://h?user+id=u@dom&password=x"} {
		if _, err := NewDSN(dsn); err != nil {
			t.Errorf("NewDSN(%q): %v", dsn, err)
		}
	}
	// SQLite takes no password: a sqlite:// URL with user info is refused.
	for _, dsn := range []string{"sqlite://u:Frag5w@h/x.db", "sqlite://u:Fr@g5w@h/x.db"} {
		if _, err := NewDSN(dsn); !errors.Is(err, ErrBadDSN) || strings.Contains(err.Error(), "g5w") {
			t.Errorf("NewDSN(%q) = %v, want it refused", dsn, err)
		}
	}
}
