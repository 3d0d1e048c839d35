package dialect

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// ErrUnknownScheme is returned for a DSN whose scheme names no dialect.
var ErrUnknownScheme = errors.New("dbq: unknown DSN scheme (want postgres://, mysql://, sqlserver:// or sqlite:)")

// DSN is a data source name split into its dialect and the form that
// dialect's driver accepts.
type DSN struct {
	Dialect Name
	// Driver is the connection string in the driver's own form: a
	// postgres:// URL for pgx, user:pass@tcp(host:port)/db for
	// go-sql-driver/mysql, a sqlserver:// URL for go-mssqldb, a file name
	// (with query parameters) for SQLite.
	Driver string
}

// String returns the DSN with any password replaced.
func (d DSN) String() string { return Redact(d.Driver) }

// ParseDSN parses a DSN and picks its dialect from the scheme:
// postgres:// or postgresql://, mysql://, sqlserver://, and sqlite: (as
// sqlite:path, sqlite://path or sqlite:///abs/path). The error never holds
// the password.
func ParseDSN(s string) (DSN, error) {
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok {
		return DSN{}, fmt.Errorf("%w: %q", ErrUnknownScheme, Redact(s))
	}
	switch strings.ToLower(scheme) {
	case "postgres", "postgresql":
		return DSN{Dialect: Postgres, Driver: s}, nil
	case "sqlserver":
		return DSN{Dialect: MSSQL, Driver: s}, nil
	case "mysql":
		drv, err := mysqlDriverDSN(s)
		if err != nil {
			return DSN{}, err
		}
		return DSN{Dialect: MySQL, Driver: drv}, nil
	case "sqlite", "sqlite3", "file":
		path := strings.TrimPrefix(rest, "//")
		if path == "" {
			return DSN{}, fmt.Errorf("dbq: sqlite DSN %q names no file", s)
		}
		return DSN{Dialect: SQLite, Driver: path}, nil
	}
	return DSN{}, fmt.Errorf("%w: %q", ErrUnknownScheme, Redact(s))
}

// mysqlDriverDSN turns mysql://user:pass@host:port/db?opts into the
// go-sql-driver/mysql form user:pass@tcp(host:port)/db?opts.
func mysqlDriverDSN(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("dbq: bad mysql DSN %q", Redact(s))
	}
	var b strings.Builder
	if u.User != nil {
		b.WriteString(u.User.Username())
		if p, ok := u.User.Password(); ok {
			b.WriteByte(':')
			b.WriteString(p)
		}
		b.WriteByte('@')
	}
	host := u.Host
	if host == "" {
		host = "127.0.0.1:3306"
	} else if u.Port() == "" {
		host += ":3306"
	}
	b.WriteString("tcp(" + host + ")/")
	b.WriteString(strings.TrimPrefix(u.Path, "/"))
	if u.RawQuery != "" {
		b.WriteString("?" + u.RawQuery)
	}
	return b.String(), nil
}

var (
	// user:secret@ in a URL or in the MySQL driver form.
	userinfoRe = regexp.MustCompile(`^((?:[A-Za-z][A-Za-z0-9+.-]*://)?[^:@/]*):[^@]*@`)
	// password=secret in a key/value or query-string form.
	passwordKVRe = regexp.MustCompile(`(?i)\b(password|pwd)=([^&;\s]*)`)
)

// Redact returns s with any password in it replaced by "xxxxx". It knows URL
// user info, the MySQL driver form and password= / pwd= parameters.
func Redact(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			s = u.String()
		}
	} else {
		s = userinfoRe.ReplaceAllString(s, "${1}:xxxxx@")
	}
	return passwordKVRe.ReplaceAllString(s, "${1}=xxxxx")
}
