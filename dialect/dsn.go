package dialect

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// ErrUnknownScheme is returned for a DSN whose scheme names no dialect.
var ErrUnknownScheme = errors.New("dbq: unknown DSN scheme")

// ParseDSN picks the dialect a DSN is for. It knows the URL forms —
// postgres:// or postgresql://, mysql:// or mariadb://, sqlserver:// (and
// go-mssqldb's odbc:), and sqlite: (sqlite:path, sqlite://path,
// sqlite:///abs/path, sqlite3:, file:) — and each driver's native form:
//   - go-sql-driver/mysql: user:pass@tcp(host:port)/db?opts, user@/db,
//     user@unix(/path)/db;
//   - libpq key=value (PostgreSQL): host=h port=5432 user=u dbname=d …,
//     recognised by a libpq connection key (host, hostaddr, port, dbname,
//     user, password, sslmode, service);
//   - SQL Server ADO (server=h;user id=u;password=p;database=d, recognised
//     by a server, data source or address key).
//
// A URL must read the same to every parser, as [NewDSN] checks. Only the
// dialect is decided here: each dialect package reads the rest of the DSN
// itself (its Open and OpenDB take every form above for it). The error, a
// *DSNError, never holds the password.
func ParseDSN(s string) (Name, error) {
	d, err := NewDSN(s)
	if err != nil {
		return "", err
	}
	return d.Dialect, nil
}

// parseDialect is ParseDSN for a string that is not a scheme:// URL.
func parseDialect(s string) (Name, error) {
	if d, ok := nativeDSN(s); ok {
		return d, nil
	}
	scheme, _, ok := strings.Cut(s, ":")
	if ok {
		switch strings.ToLower(scheme) {
		case "postgres", "postgresql":
			return Postgres, nil
		case "sqlserver", "odbc":
			return MSSQL, nil
		case "mysql", "mariadb":
			return MySQL, nil
		case "sqlite", "sqlite3", "file":
			return SQLite, nil
		}
	}
	reason := "not a DSN in any form dbq knows"
	if ok && plainSchemeRe.MatchString(scheme) {
		reason = "\"" + scheme + ":\""
		if m := schemeRe.FindString(s); m != "" {
			reason = "\"" + m + "\""
		}
	}
	return "", &DSNError{Reason: reason + " (want postgres://, postgresql://, mysql://, mariadb://, sqlserver:// or sqlite:, or a driver's own form: user:pass@tcp(host:3306)/db, host=h dbname=db, server=h;user id=u;…)", Kind: ErrUnknownScheme}
}

// plainSchemeRe is a scheme an error may name: it cannot be a password.
var plainSchemeRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// nativeDSN recognises a driver's own DSN form. A string that starts with
// a scheme dbq knows is that scheme's; one that starts with key= is libpq's
// or ADO's (no MySQL user name holds a '='), whatever its password holds.
func nativeDSN(s string) (Name, bool) {
	scheme, _, _ := strings.Cut(s, ":")
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql", "mysql", "mariadb", "sqlserver", "sqlite", "sqlite3", "file", "odbc":
		if schemeRe.MatchString(s) || strings.EqualFold(scheme, "odbc") || strings.HasPrefix(strings.ToLower(s), "sqlite") {
			return "", false
		}
	}
	if !keyFirstRe.MatchString(s) && isMySQLDriverForm(s) {
		return MySQL, true
	}
	// A password may hold a ';' or a space, so a string can read both as
	// libpq's and as ADO's; libpq's strings start with one of its own keys.
	libpq, first := isLibpq(s)
	switch {
	case libpq && first != "password" && first != "port":
		return Postgres, true
	case isADO(s):
		return MSSQL, true
	case libpq:
		return Postgres, true
	}
	return "", false
}

// mysqlNetRe is what go-sql-driver/mysql's form holds between the '@' and
// the database's '/': a net and its address, or nothing.
var mysqlNetRe = regexp.MustCompile(`^(?:(?:tcp[46]?|unix)(?:\(.*\))?)?$`)

// isMySQLDriverForm reads s as go-sql-driver/mysql does: the database
// follows the last '/', the user info ends at the last '@' before it. With
// no user info, s must name its net and address (tcp(host)/db).
func isMySQLDriverForm(s string) bool {
	slash := strings.LastIndexByte(s, '/')
	if slash < 0 {
		return false
	}
	at := strings.LastIndexByte(s[:slash], '@')
	if at < 0 {
		net := s[:slash]
		return net != "" && strings.HasSuffix(net, ")") && mysqlNetRe.MatchString(net)
	}
	return mysqlNetRe.MatchString(s[at+1 : slash])
}

var (
	// The keys that make a key=value string libpq's.
	libpqKeys = map[string]bool{"host": true, "hostaddr": true, "port": true, "dbname": true,
		"user": true, "password": true, "sslmode": true, "service": true}
	// The keys that make a ;-separated string an ADO connection string.
	adoServerKeys = map[string]bool{"server": true, "data source": true, "address": true,
		"addr": true, "network address": true}
	keyFirstRe = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_ ]*=`)
	libpqKeyRe = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*`)
	adoKeyRe   = regexp.MustCompile(`^\s*([A-Za-z][A-Za-z0-9 ]*?)\s*=`)
)

// isLibpq reports whether s is libpq's key=value form, with at least one of
// libpq's connection keys, and returns its first key.
func isLibpq(s string) (ok bool, first string) {
	known := false
	for rest := s; strings.TrimSpace(rest) != ""; {
		m := libpqKeyRe.FindStringSubmatchIndex(rest)
		if m == nil {
			return false, ""
		}
		key := rest[m[2]:m[3]]
		if first == "" {
			first = key
		}
		known = known || libpqKeys[key]
		rest = rest[m[1]:]
		n := libpqLen(rest)
		if n == 0 {
			return false, ""
		}
		rest = rest[n:]
	}
	return known, first
}

// isADO reports whether s is an ADO connection string: ;-separated
// key=value pairs, one of them naming the server.
func isADO(s string) bool {
	server := false
	for rest := s; rest != ""; {
		n := adoLen(rest)
		part := rest[:n]
		if n < len(rest) {
			n++ // the ';'
		}
		rest = rest[n:]
		if strings.TrimSpace(part) == "" {
			continue
		}
		m := adoKeyRe.FindStringSubmatch(part)
		if m == nil {
			return false
		}
		server = server || adoServerKeys[strings.Join(strings.Fields(strings.ToLower(m[1])), " ")]
	}
	return server
}

// mask replaces a password.
const mask = "xxxxx"

var (
	// The scheme of a URL, with its "//".
	schemeRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)
	// A password key and its '=' in a key/value form or a query string.
	// Space is Unicode white space, as go-mssqldb trims it.
	passwordKeyRe = regexp.MustCompile(`(?i)\b(?:password|pwd)[\s\v\x{85}\p{Z}]*=[\s\v\x{85}\p{Z}]*`)
)

// Redact returns s with any password in it replaced by "xxxxx". A DSN
// [NewDSN] reads is shown as [DSN.String] builds it from its parts; one
// NewDSN refuses as a malformed URL shows its scheme only. Other text is
// read as the forms the drivers read. It knows
// the forms the drivers read, and masks as much as any of them could take
// for the password:
//   - URL user info, user:pass@host, escaped or as typed (the password runs
//     to the last '@' of the authority);
//   - the MySQL driver form user:pass@tcp(host)/db, where the password
//     runs to the last '@' before the last '/';
//   - password= and pwd= keys, with or without spaces around '=': in a URL
//     query (the value ends at '&'), in libpq's key=value form (ends at
//     unescaped white space; 'quoted' with \' escapes), in ADO strings
//     (ends at a ';' outside double quotes) and in go-mssqldb's odbc: form
//     ({braced} with }}).
//
// A string that parses as a URL with user info is read as a URL. Where s
// is none of these forms, a URL quoted inside it (a driver's error that
// quotes the DSN: parse "sqlserver://u:p@h": …) is masked as a URL that
// runs to the end of s.
func Redact(s string) string {
	d, err := NewDSN(s)
	if err == nil {
		return d.String()
	}
	var bad *DSNError
	if errors.As(err, &bad) && errors.Is(bad.Kind, ErrBadDSN) && bad.Shown != "" {
		return bad.Shown
	}
	if out := redact(s); out != s {
		return out
	}
	return redactQuotedURL(s)
}

// quotedURLRe is the start of a URL inside a longer text: a scheme and its
// "//" after a quote, white space or an opening bracket.
var quotedURLRe = regexp.MustCompile(`["'\s(<\[][A-Za-z][A-Za-z0-9+.-]*://`)

// redactQuotedURL masks the password of the first URL inside s that has
// one, reading it to the end of s.
func redactQuotedURL(s string) string {
	for _, m := range quotedURLRe.FindAllStringIndex(s, -1) {
		i := m[0] + 1
		if out := redact(s[i:]); out != s[i:] {
			return s[:i] + out
		}
	}
	return s
}

// redact is Redact for a string that is one of the forms.
func redact(s string) string {
	if strings.HasPrefix(s, "odbc:") {
		out, _, _ := redactUserinfo(redactKeys(s), false)
		return out
	}
	// user:pass@net(addr)/: no URL has a '(' before its path.
	if out, end, ok := maskUserinfo(s, 0, driverAddrRe, true); ok {
		return out[:end] + redactKeys(out[end:])
	}
	u, err := url.Parse(s)
	isURL := err == nil && u.User != nil
	if isURL {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), mask)
			s = u.String()
			// The password is gone; keys after it may hold another.
			if i := strings.Index(s, ":"+mask+"@"); i >= 0 {
				i += len(mask) + 2
				return s[:i] + redactKeys(s[i:])
			}
			return redactKeys(s)
		}
	}
	if out, end, ok := maskUserinfo(s, 0, driverNetRe, true); ok {
		return out[:end] + redactKeys(out[end:])
	}
	if isURL {
		return redactKeys(s)
	}
	if out, end, ok := redactUserinfo(s, true); ok {
		return out[:end] + redactKeys(out[end:])
	}
	// A user name with '=', ';' or white space may also be a key/value
	// form: mask its keys, then any user info left.
	out, _, _ := redactUserinfo(redactKeys(s), false)
	return out
}

var (
	// What follows the '@' of the MySQL driver form, up to its last '/':
	// a net with an address in parentheses, or a net alone, or nothing.
	driverAddrRe = regexp.MustCompile(`^[^(]*\(`)
	driverNetRe  = regexp.MustCompile(`^(?:tcp[46]?|unix|)$`)
	// A user name that no key/value form would make.
	plainUserRe = regexp.MustCompile(`^[^=;\s]*$`)
)

// redactUserinfo masks the password of user:pass@ at the start of s: as
// the MySQL driver reads user:pass@net(addr)/db, else after a scheme:// as
// a URL's. It returns the result and where the text after the masked
// password starts. With plain, the user name must be plainUserRe's.
func redactUserinfo(s string, plain bool) (string, int, bool) {
	for _, net := range []*regexp.Regexp{driverAddrRe, driverNetRe} {
		if out, end, ok := maskUserinfo(s, 0, net, plain); ok {
			return out, end, true
		}
	}
	if m := schemeRe.FindStringIndex(s); m != nil {
		return maskUserinfo(s, m[1], nil, plain)
	}
	return s, 0, false
}

// maskUserinfo masks from the first ':' of s[start:] to the last '@'
// before its last '/' (or its end). With net set, only when net matches
// the text between that '@' and that '/'.
func maskUserinfo(s string, start int, net *regexp.Regexp, plain bool) (string, int, bool) {
	rest := s[start:]
	end := strings.LastIndexByte(rest, '/')
	if end < 0 {
		end = len(rest) // not a DSN the driver takes, but its error may show it
	}
	at := strings.LastIndexByte(rest[:end], '@')
	if at < 0 || net != nil && !net.MatchString(rest[at+1:end]) {
		return s, 0, false
	}
	colon := strings.IndexByte(rest[:at], ':')
	if colon < 0 || plain && !plainUserRe.MatchString(rest[:colon]) {
		return s, 0, false
	}
	out := s[:start] + rest[:colon+1] + mask
	return out + rest[at:], len(out) + 1, true
}

// redactKeys masks the value of every password= and pwd= key in s.
func redactKeys(s string) string {
	var b strings.Builder
	done := 0
	for _, loc := range passwordKeyRe.FindAllStringIndex(s, -1) {
		if loc[0] < done {
			continue // inside the value just masked
		}
		b.WriteString(s[done:loc[1]])
		b.WriteString(mask)
		done = loc[1] + valueLen(s[loc[1]:], keyContext(s, loc[0], loc[1]))
	}
	b.WriteString(s[done:])
	return b.String()
}

// Where a password key sits, which decides where its value ends.
const (
	ctxUnknown = iota
	ctxQuery   // a URL query: ?password=v&…
	ctxLibpq   // libpq key=value: … password=v …
	ctxADO     // ADO: …;password=v;…
	ctxODBC    // odbc:…;pwd={v};…
)

var libpqNextKeyRe = regexp.MustCompile(`^\s+[A-Za-z_][A-Za-z0-9_]*\s*=`)

// keyContext tells the form of s from what precedes the key at i, whose
// value starts at v.
func keyContext(s string, i, v int) int {
	before := strings.TrimRight(s[:i], " \t\n\r\v\f")
	switch {
	case i > 0 && (s[i-1] == '?' || s[i-1] == '&'):
		return ctxQuery
	case strings.HasPrefix(s, "odbc:"):
		return ctxODBC
	case strings.HasSuffix(before, ";"):
		return ctxADO
	case before != "" && len(before) < i:
		return ctxLibpq
	case before == "":
		// The first key: libpq if its reading is followed by another key,
		// else either form, so the longer reading.
		if n := libpqLen(s[v:]); libpqNextKeyRe.MatchString(s[v+n:]) {
			return ctxLibpq
		}
	}
	return ctxUnknown
}

// valueLen returns the length of the value at the start of v as the form
// ctx reads it; where the form is unknown, the longest reading.
func valueLen(v string, ctx int) int {
	switch ctx {
	case ctxQuery:
		if i := strings.IndexAny(v, "&# \t\n"); i >= 0 {
			return i
		}
		return len(v)
	case ctxLibpq:
		return libpqLen(v)
	case ctxADO:
		return adoLen(v)
	case ctxODBC:
		if strings.HasPrefix(v, "{") {
			return bracedLen(v)
		}
		if i := strings.IndexByte(v, ';'); i >= 0 {
			return i
		}
		return len(v)
	}
	return max(libpqLen(v), adoLen(v), bracedLen(v))
}

// libpqLen: a 'quoted' value with backslash escapes, or a bare one up to
// unescaped white space.
func libpqLen(v string) int {
	quoted := strings.HasPrefix(v, "'")
	i := 0
	if quoted {
		i = 1
	}
	for ; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\':
			i++
		case quoted && c == '\'':
			return i + 1
		case !quoted && strings.IndexByte(" \t\n\r\v\f", c) >= 0:
			return i
		}
	}
	return len(v)
}

// adoLen: up to a ';' outside double quotes ("" inside them is a quote).
func adoLen(v string) int {
	in := false
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '"':
			in = !in
		case ';':
			if !in {
				return i
			}
		}
	}
	return len(v)
}

// bracedLen: an ODBC {value} with }} for }, else nothing.
func bracedLen(v string) int {
	if !strings.HasPrefix(v, "{") {
		return 0
	}
	for i := 1; i < len(v); i++ {
		if v[i] == '}' {
			if i+1 < len(v) && v[i+1] == '}' {
				i++
				continue
			}
			return i + 1
		}
	}
	return len(v)
}
