package dialect

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// A DSN quoted in a longer text, as a driver's error quotes the DSN it
// could not parse, loses its password too.
func TestRedactQuotedURL(t *testing.T) {
	for _, dsn := range []string{
		"sqlserver://sa:pa ss@h:1433",
		"sqlserver://sa:Secret-1@h:1433?database=x",
		"postgres://u:s3c@ret@h/db",
		"sqlserver://" + url.UserPassword("sa", "p:w/d").String() + "@h",
	} {
		u := dsn[strings.Index(dsn, "://")+3 : strings.LastIndex(dsn, "@")]
		pw := u[strings.Index(u, ":")+1:]
		for _, text := range []string{
			fmt.Sprintf("parse %q: invalid port", dsn),
			"bad DSN '" + dsn + "'",
			"connect (" + dsn + ") failed",
			"bad DSN " + dsn,
		} {
			out := Redact(text)
			if strings.Contains(out, pw) || !strings.Contains(out, "xxxxx") {
				t.Errorf("Redact(%q) = %q", text, out)
			}
		}
	}
	for _, plain := range []string{"connection refused", `parse "sqlserver://h:1433": invalid port`, "see https://example.com/docs"} {
		if out := Redact(plain); out != plain {
			t.Errorf("Redact(%q) = %q, want it unchanged", plain, out)
		}
	}
}
