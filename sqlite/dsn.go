package sqlite

import (
	"database/sql"
	"fmt"
	"net/url"
	"strings"

	"github.com/dbqueue/dbq/queue"
)

// driverDSN is a DSN read for modernc.org/sqlite.
type driverDSN struct {
	file   string // the database file, for messages
	driver string // the data source name the driver takes
}

// DSN returns the modernc.org/sqlite data source name [Open] uses for dsn:
// WAL journal, synchronous=NORMAL, a busy timeout of [BusyTimeout] and
// BEGIN IMMEDIATE for database/sql transactions, set on every connection
// of the pool. dsn is a path, or sqlite:path, sqlite://path or
// sqlite:///abs/path (sqlite3: and file: likewise). Query parameters
// already on dsn (after '?') are kept, and win over these defaults. Use it
// to open a *sql.DB for [New]. Errors wrap queue.ErrInvalidConfig.
func DSN(dsn string) (string, error) {
	p, err := parseDSN(dsn)
	return p.driver, err
}

// File returns the database file dsn names (any form [DSN] takes), without
// its query parameters.
func File(dsn string) (string, error) {
	p, err := parseDSN(dsn)
	return p.file, err
}

// parseDSN reads dsn as [DSN] describes.
func parseDSN(dsn string) (driverDSN, error) {
	path, err := dsnPath(dsn)
	if err != nil {
		return driverDSN{}, err
	}
	file, query, _ := strings.Cut(path, "?")
	if file == "" {
		return driverDSN{}, fmt.Errorf("%w: sqlite: empty database path", queue.ErrInvalidConfig)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return driverDSN{}, fmt.Errorf("%w: sqlite: bad query in database path: %v", queue.ErrInvalidConfig, err)
	}
	if file == ":memory:" || strings.HasPrefix(file, "file::memory:") || strings.EqualFold(q.Get("mode"), "memory") {
		return driverDSN{}, fmt.Errorf("%w: sqlite: an in-memory database is private to one connection; use a file", queue.ErrInvalidConfig)
	}
	params := []string{}
	if query != "" {
		params = append(params, query)
	}
	if !hasPragma(q, "busy_timeout", "_busy_timeout", "_timeout") {
		params = append(params, fmt.Sprintf("_pragma=busy_timeout(%d)", BusyTimeout.Milliseconds()))
	}
	if !hasPragma(q, "journal_mode", "_journal_mode", "_journal") {
		params = append(params, "_pragma=journal_mode(WAL)")
	}
	if !hasPragma(q, "synchronous", "_synchronous", "_sync") {
		params = append(params, "_pragma=synchronous(NORMAL)")
	}
	if !hasPragma(q, "", "_txlock") {
		params = append(params, "_txlock=immediate")
	}
	return driverDSN{file: file, driver: file + "?" + strings.Join(params, "&")}, nil
}

// dsnPath strips a sqlite:, sqlite3: or file: scheme (and a "//" after
// it) from dsn, as dbq's other DSN readers do; anything else is a path.
func dsnPath(dsn string) (string, error) {
	scheme, rest, ok := strings.Cut(dsn, ":")
	if !ok {
		return dsn, nil
	}
	switch strings.ToLower(scheme) {
	case "sqlite", "sqlite3", "file":
		path := strings.TrimPrefix(rest, "//")
		if host, _, _ := strings.Cut(path, "/"); len(path) < len(rest) && strings.Contains(host, "@") {
			return "", fmt.Errorf("%w: sqlite: a SQLite DSN takes no user or password (want sqlite:path/to/file.db or sqlite:///abs/path.db)", queue.ErrInvalidConfig)
		}
		if path == "" {
			return "", fmt.Errorf("%w: sqlite DSN %q names no file", queue.ErrInvalidConfig, dsn)
		}
		return path, nil
	}
	return dsn, nil
}

// hasPragma reports whether the query q sets pragma, by _pragma or by one
// of the driver's shorthand keys.
func hasPragma(q url.Values, pragma string, keys ...string) bool {
	for _, k := range keys {
		if _, ok := q[k]; ok {
			return true
		}
	}
	for _, p := range q["_pragma"] {
		if pragma != "" && strings.HasPrefix(strings.ToLower(strings.TrimSpace(p)), pragma) {
			return true
		}
	}
	return false
}

// open opens a *sql.DB on the driver DSN.
func (p driverDSN) open() (*sql.DB, error) {
	db, err := sql.Open(DriverName, p.driver)
	if err != nil {
		return nil, fmt.Errorf("dbq: sqlite: open %s: %w", p.file, err)
	}
	return db, nil
}
