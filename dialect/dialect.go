// Package dialect holds what every dbq dialect shares and that needs no
// database driver: dialect names, the validation and quoting of
// identifiers, queue-name validation, DSN parsing and redaction, and the
// retryable error class.
//
// Only validated identifiers are ever spliced into SQL, and always quoted
// by [Names.Quote]; every value travels as a bind parameter.
package dialect

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Name identifies a database dialect.
type Name string

// The dialects dbq ships.
const (
	Postgres Name = "postgres"
	MySQL    Name = "mysql"
	MSSQL    Name = "mssql"
	SQLite   Name = "sqlite"
)

// All lists every shipped dialect, in a stable order.
var All = []Name{Postgres, MySQL, MSSQL, SQLite}

// ErrInvalidIdentifier is returned for a schema name or table prefix that is
// not a plain SQL identifier.
var ErrInvalidIdentifier = errors.New("dbq: invalid identifier")

// ErrInvalidQueue is returned for a queue name that is empty, too long or
// holds characters outside [A-Za-z0-9_.:-].
var ErrInvalidQueue = errors.New("dbq: invalid queue name")

// MaxQueueLen is the longest queue name, in bytes. The queue column is sized
// for it on every dialect.
const MaxQueueLen = 64

// MaxPrefixLen is the longest table prefix; with the longest table suffix the
// name stays within every dialect's identifier limit (PostgreSQL: 63 bytes).
const MaxPrefixLen = 40

// DefaultPrefix is the table prefix used when none is configured.
const DefaultPrefix = "dbq_"

var (
	identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	queueRe = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)
)

// ValidateIdentifier reports whether s may name a schema or prefix a table:
// a letter or underscore followed by letters, digits and underscores, at
// most max bytes. It returns an error wrapping [ErrInvalidIdentifier].
func ValidateIdentifier(what, s string, max int) error {
	if s == "" || len(s) > max || !identRe.MatchString(s) {
		return fmt.Errorf("%w: %s %q must match [A-Za-z_][A-Za-z0-9_]* and be at most %d bytes",
			ErrInvalidIdentifier, what, s, max)
	}
	return nil
}

// ValidateQueue reports whether q is a valid queue name, returning an error
// wrapping [ErrInvalidQueue] if it is not.
func ValidateQueue(q string) error {
	if q == "" || len(q) > MaxQueueLen || !queueRe.MatchString(q) {
		return fmt.Errorf("%w: %q must be 1 to %d bytes of [A-Za-z0-9_.:-]", ErrInvalidQueue, q, MaxQueueLen)
	}
	return nil
}

// Names says where a dialect's tables live: an optional schema (a
// PostgreSQL or SQL Server schema, a MySQL database; unused by SQLite) and a
// table-name prefix. The zero value means the connection's default schema
// and the prefix "dbq_".
type Names struct {
	Schema string
	Prefix string
}

// WithDefaults returns n with an empty prefix replaced by [DefaultPrefix].
func (n Names) WithDefaults() Names {
	if n.Prefix == "" {
		n.Prefix = DefaultPrefix
	}
	return n
}

// Validate checks the schema and prefix, after defaults.
func (n Names) Validate() error {
	n = n.WithDefaults()
	if n.Schema != "" {
		if err := ValidateIdentifier("schema", n.Schema, 63); err != nil {
			return err
		}
	}
	return ValidateIdentifier("prefix", n.Prefix, MaxPrefixLen)
}

// Jobs returns the unquoted name of the jobs table.
func (n Names) Jobs() string { return n.WithDefaults().Prefix + "jobs" }

// Versions returns the unquoted name of the migration version table.
func (n Names) Versions() string { return n.WithDefaults().Prefix + "schema_version" }

// Quote quotes the identifier ident for dialect d. ident must already be
// valid; Quote still doubles any closing quote character so that a caller's
// mistake cannot change a statement's shape.
func Quote(d Name, ident string) string {
	switch d {
	case MySQL:
		return "`" + strings.ReplaceAll(ident, "`", "``") + "`"
	case MSSQL:
		return "[" + strings.ReplaceAll(ident, "]", "]]") + "]"
	default:
		return `"` + strings.ReplaceAll(ident, `"`, `""`) + `"`
	}
}

// Qualified returns the quoted, schema-qualified name of table for dialect d.
func (n Names) Qualified(d Name, table string) string {
	if n.Schema == "" || d == SQLite {
		return Quote(d, table)
	}
	return Quote(d, n.Schema) + "." + Quote(d, table)
}
