package dialect

import (
	"context"
	"errors"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"syscall"
)

// ErrInvalidConfig is the sentinel of a configuration dbq cannot use: a
// Config field out of range, a DSN that does not parse. Package queue
// exports it as queue.ErrInvalidConfig.
var ErrInvalidConfig = errors.New("dbq: invalid config")

// ErrBadDSN is matched by every [DSNError] of a DSN in a form dbq knows
// that it cannot read: a URL whose password is not URL-escaped, a URL
// mixed with a driver's form, a DSN its driver refuses.
var ErrBadDSN = errors.New("dbq: bad DSN")

// EscapeHint is what a DSNError says of a URL whose user info does not
// read the same to every parser: how to write the password.
const EscapeHint = "the password must be URL-escaped (%40 for @, %3F for ?, %23 for #, %2F for /, %25 for %)"

// DSNError is a DSN dbq cannot use. Its message is built from what was
// parsed, never from the DSN's text: it holds the DSN with its password
// masked when the DSN parsed far enough to tell the password apart, else
// its scheme only, and a reason that quotes none of it. It matches
// ErrInvalidConfig and Kind (ErrBadDSN or ErrUnknownScheme).
type DSNError struct {
	// Shown is the DSN as the message shows it: masked, or "scheme://…",
	// or empty.
	Shown string
	// Reason says what is wrong and how to write it instead.
	Reason string
	// Kind is ErrBadDSN or ErrUnknownScheme.
	Kind error
}

func (e *DSNError) Error() string {
	msg := "dbq: bad DSN"
	if errors.Is(e.Kind, ErrUnknownScheme) {
		msg = "dbq: unknown DSN scheme"
	}
	if e.Shown != "" {
		msg += " " + e.Shown
	}
	return msg + ": " + e.Reason
}

// Unwrap returns Kind and ErrInvalidConfig.
func (e *DSNError) Unwrap() []error { return []error{e.Kind, ErrInvalidConfig} }

// ConnectError is a failed first contact with the database a DSN names.
// Its message is built from the parsed DSN, password masked, and a cause
// cleaned of every spelling of the password and of the DSN's text; where
// the driver's message cannot be cleaned it is dropped for a plain cause
// (connection refused, no such host, authentication failed). Err keeps
// the driver's error for errors.Is and errors.As: its own text may quote
// the DSN, so print the ConnectError, not Err.
type ConnectError struct {
	// DSN is the DSN, password masked.
	DSN string
	// Cause is the driver's message, cleaned.
	Cause string
	// Err is the driver's error.
	Err error
}

func (e *ConnectError) Error() string { return "dbq: connect to " + e.DSN + ": " + e.Cause }

// Unwrap returns the driver's error.
func (e *ConnectError) Unwrap() error { return e.Err }

// DSN is a DSN read once: its dialect, how to show it, and what of it must
// never be shown. Make one with [NewDSN].
type DSN struct {
	// Dialect is the database the DSN is for.
	Dialect Name
	raw     string
	shown   string
	// secrets are the spellings of the password (decoded, as written, in
	// pieces) that no message may hold, longest first.
	secrets []string
}

// String returns the DSN with its password masked, built from its parsed
// parts.
func (d *DSN) String() string { return d.shown }

// minSecret is the shortest piece of a password that Scrub replaces in a
// driver's message; a shorter one drops the message where it appears.
const minSecret = 4

// Scrub returns msg, a driver's message about this DSN, with the DSN's
// text replaced by its masked form and every spelling of the password
// masked. ok is false when a password too short to replace safely is in
// msg: then no part of msg may be shown.
func (d *DSN) Scrub(msg string) (out string, ok bool) {
	for _, s := range d.secrets {
		if len(s) < minSecret && strings.Contains(msg, s) {
			return "", false
		}
	}
	if d.raw != "" {
		msg = strings.ReplaceAll(msg, d.raw, d.shown)
	}
	for _, s := range d.secrets {
		if len(s) >= minSecret {
			msg = strings.ReplaceAll(msg, s, mask)
		}
	}
	return msg, true
}

// ConnectError wraps err, the driver's error on a first contact, in a
// *ConnectError (nil stays nil).
func (d *DSN) ConnectError(err error) error {
	if err == nil {
		return nil
	}
	return &ConnectError{DSN: d.shown, Cause: d.Cause(err), Err: err}
}

// BadDSN returns a *DSNError for this DSN whose reason is what, followed
// by err's message cleaned as Scrub does (or err's plain cause).
func (d *DSN) BadDSN(what string, err error) error {
	return &DSNError{Shown: d.shown, Reason: what + ": " + d.Cause(err), Kind: ErrBadDSN}
}

// Cause returns err's message cleaned of the DSN, or where that cannot be
// done, the plain cause err's type tells.
func (d *DSN) Cause(err error) string {
	if msg, ok := d.Scrub(err.Error()); ok {
		return msg
	}
	return PlainCause(err)
}

// PlainCause names what err is from its type alone, quoting none of its
// text but a host name that did not resolve.
func PlainCause(err error) string {
	var dns *net.DNSError
	var st interface{ SQLState() string }
	var ne net.Error
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		return "no such host " + dns.Name
	case errors.As(err, &dns):
		return "host name lookup failed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &st) && strings.HasPrefix(st.SQLState(), "28"):
		return "password authentication failed (SQLSTATE " + st.SQLState() + ")"
	case errors.As(err, &st):
		return "server error (SQLSTATE " + st.SQLState() + ")"
	}
	return "the driver's message is not shown: it quotes the DSN"
}

// NewDSN reads s as [ParseDSN] does and returns it parsed. A URL
// (scheme://…) must read the same to every parser: its user info holds at
// most one '@' and no '@' follows what ends the host ('/', '?', '#') but
// in a query value; else the error says the password must be URL-escaped. A URL
// mixed with a driver's form (mysql://root@tcp(h:3306)/db) is refused
// naming both forms the dialect takes. mariadb:// is MySQL. Errors are
// *DSNError, which quote no part of s they could not tell apart from the
// password.
func NewDSN(s string) (*DSN, error) {
	if m := schemeRe.FindString(s); m != "" {
		if _, known := urlDialects[strings.ToLower(m[:len(m)-3])]; known {
			return newURLDSN(s, strings.ToLower(m[:len(m)-3]))
		}
	}
	d, err := parseDialect(s)
	if err != nil {
		return nil, err
	}
	if d == SQLite {
		// No password: a SQLite DSN is a path. Mask what a driver of
		// another database might take for one all the same.
		return &DSN{Dialect: d, raw: s, shown: redact(s)}, nil
	}
	if d == MySQL {
		if _, _, ok := strings.Cut(s, ":"); ok && isMySQLDriverForm(s) {
			return mysqlDriverDSN(s), nil
		}
	}
	return keysDSN(d, s), nil
}

// urlDialects are the URL schemes dbq knows.
var urlDialects = map[string]Name{
	"postgres": Postgres, "postgresql": Postgres, "mysql": MySQL, "mariadb": MySQL,
	"sqlserver": MSSQL, "sqlite": SQLite, "sqlite3": SQLite, "file": SQLite,
}

// forms names, per dialect, the two forms of DSN it takes.
var forms = map[Name]string{
	Postgres: "postgres://user:pass@host:5432/db or host=host port=5432 user=user password=pass dbname=db",
	MySQL:    "mysql://user:pass@host:3306/db (mariadb:// likewise) or user:pass@tcp(host:3306)/db",
	MSSQL:    "sqlserver://user:pass@host:1433?database=db or server=host;user id=user;password=pass;database=db",
	SQLite:   "sqlite:path/to/file.db or sqlite:///abs/path.db",
}

// newURLDSN reads s, a URL with the given scheme.
func newURLDSN(s, scheme string) (*DSN, error) {
	d := urlDialects[scheme]
	shown := scheme + "://…"
	rest := s[len(scheme)+3:]
	auth := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		auth = rest[:i]
	}
	if d == SQLite {
		if strings.Contains(auth, "@") {
			return nil, &DSNError{Shown: shown, Reason: "SQLite takes no user or password: write " + forms[SQLite], Kind: ErrBadDSN}
		}
		return &DSN{Dialect: d, raw: s, shown: s}, nil
	}
	switch {
	case strings.Count(auth, "@") > 1:
		return nil, &DSNError{Shown: shown, Reason: "more than one '@' before the host: " + EscapeHint, Kind: ErrBadDSN}
	case strayAt(rest[len(auth):]):
		return nil, &DSNError{Shown: shown, Reason: "an '@' after a '/', '?' or '#' that ends the host: " + EscapeHint, Kind: ErrBadDSN}
	case strings.ContainsAny(auth[strings.LastIndexByte(auth, '@')+1:], "()"):
		return nil, &DSNError{Shown: shown, Reason: "a URL mixed with the driver's tcp(host) form: write " + forms[d], Kind: ErrBadDSN}
	}
	u, err := url.Parse(s)
	if err != nil {
		// url's message quotes the text it could not read.
		return nil, &DSNError{Shown: shown, Reason: "not a valid URL (if the password holds @ ? # / or %, " + EscapeHint + ")", Kind: ErrBadDSN}
	}
	return urlDSN(d, s, u), nil
}

// strayAt reports whether rest, what follows a URL's host, holds an '@'
// that a password cut short by a '/', '?' or '#' in it would leave there:
// one before any '=', one after a '#', or one in a query value that a '/'
// follows (…?x=y@host/db). An '@' in a query value (?application_name=a@b)
// is the value's.
func strayAt(rest string) bool {
	at := strings.IndexByte(rest, '@')
	if at < 0 {
		return false
	}
	if eq := strings.IndexByte(rest, '='); eq < 0 || at < eq {
		return true
	}
	if h := strings.IndexByte(rest, '#'); h >= 0 && strings.Contains(rest[h:], "@") {
		return true
	}
	for _, v := range strings.Split(rest, "&") {
		if i := strings.IndexByte(v, '@'); i >= 0 && strings.Contains(v[i:], "/") {
			return true
		}
	}
	return false
}

// passwordParam is a URL query key that holds a password.
var passwordParam = regexp.MustCompile(`(?i)^\s*(?:password|pwd)\s*$`)

// urlDSN is the parsed URL u of s: shown with its password and any
// password query parameter masked.
func urlDSN(d Name, s string, u *url.URL) *DSN {
	ds := &DSN{Dialect: d, raw: s}
	shown := *u
	if p, ok := u.User.Password(); ok {
		ds.addSecret(p)
		// As written: between the user's ':' and the '@'.
		info := s[len(u.Scheme)+3 : strings.IndexByte(s, '@')]
		ds.addSecret(info[strings.IndexByte(info, ':')+1:])
		shown.User = url.UserPassword(u.User.Username(), mask)
	}
	if q, err := url.ParseQuery(u.RawQuery); err == nil {
		masked := false
		for k, vs := range q {
			if passwordParam.MatchString(k) {
				for i, v := range vs {
					ds.addSecret(v)
					vs[i] = mask
				}
				masked = true
			}
		}
		if masked {
			for _, part := range strings.Split(u.RawQuery, "&") {
				if k, v, _ := strings.Cut(part, "="); passwordParam.MatchString(unescapeQuery(k)) {
					ds.addSecret(v)
				}
			}
			shown.RawQuery = q.Encode()
		}
	}
	ds.shown = shown.String()
	return ds
}

func unescapeQuery(s string) string {
	if u, err := url.QueryUnescape(s); err == nil {
		return u
	}
	return s
}

// mysqlDriverDSN is s in go-sql-driver/mysql's form, read as that driver
// reads it: the user info ends at the last '@' before the last '/', the
// password starts after its first ':'.
func mysqlDriverDSN(s string) *DSN {
	slash := strings.LastIndexByte(s, '/')
	at := strings.LastIndexByte(s[:slash], '@')
	ds := &DSN{Dialect: MySQL, raw: s, shown: s}
	if at < 0 {
		return ds
	}
	user, pw, ok := strings.Cut(s[:at], ":")
	if !ok {
		return ds
	}
	ds.addSecret(pw)
	ds.shown = user + ":" + mask + redactKeys(s[at:])
	return ds
}

// keysDSN is s in a key=value form (libpq's, ADO's, odbc:): shown with the
// value of every password key masked.
func keysDSN(d Name, s string) *DSN {
	ds := &DSN{Dialect: d, raw: s}
	for _, loc := range passwordKeyRe.FindAllStringIndex(s, -1) {
		v := s[loc[1]:]
		v = v[:valueLen(v, keyContext(s, loc[0], loc[1]))]
		ds.addSecret(v)
		ds.addSecret(strings.Trim(v, `'"{} `))
	}
	ds.shown = redactKeys(s)
	if strings.HasPrefix(strings.ToLower(s), "odbc:") {
		ds.shown, _, _ = redactUserinfo(ds.shown, false)
	}
	return ds
}

// addSecret records p, and its pieces between the characters a URL must
// escape, as text no message may hold.
func (d *DSN) addSecret(p string) {
	if p == "" || p == mask {
		return
	}
	add := func(s string) {
		if s != "" && !slices.Contains(d.secrets, s) {
			d.secrets = append(d.secrets, s)
		}
	}
	add(p)
	add(url.QueryEscape(p))
	add(url.PathEscape(p))
	for _, piece := range strings.FieldsFunc(p, func(r rune) bool { return strings.ContainsRune("@?#/:%&=;", r) }) {
		if len(piece) >= minSecret {
			add(piece)
		}
	}
	slices.SortFunc(d.secrets, func(a, b string) int { return len(b) - len(a) })
}
