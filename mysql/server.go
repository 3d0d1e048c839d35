package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Flavor names the server family.
type Flavor string

// The server families the dialect runs on.
const (
	MySQL   Flavor = "MySQL"
	MariaDB Flavor = "MariaDB"
	// TiDB speaks MySQL's protocol and SQL. Its SELECT … FOR UPDATE SKIP
	// LOCKED parses but locks nothing, which the claim does not rely on
	// (doc.go, "Trust the claim"), and it refuses READ UNCOMMITTED, so its
	// claimers read candidates in READ COMMITTED.
	TiDB Flavor = "TiDB"
)

// Server describes the database server a Driver talks to, as New found it.
type Server struct {
	Flavor Flavor
	// Major, Minor and Patch are the server's own version: TiDB's (7.5.1
	// of "8.0.11-TiDB-v7.5.1"), not the MySQL version it reports.
	Major, Minor, Patch int
	// Version is SELECT VERSION() as the server reports it.
	Version string
	// AutoincLockMode is @@innodb_autoinc_lock_mode (MySQL 8 defaults to 2,
	// MariaDB to 1). Enqueue's ids are right in every mode; see doc.go.
	AutoincLockMode int
	// AutoincIncrement is @@auto_increment_increment: the step between the
	// ids of one multi-row INSERT (1 unless, e.g., Galera sets it).
	AutoincIncrement int64
	// MaxAllowedPacket is @@max_allowed_packet; Enqueue keeps each INSERT
	// well below it.
	MaxAllowedPacket int64
	// Galera is @@wsrep_on: the server is a node of a Galera cluster
	// (MariaDB Galera Cluster, Percona XtraDB Cluster). Row locks are then
	// the node's own, and two claims on different nodes that took the same
	// rows meet at COMMIT, where certification lets one win and fails the
	// other with error 1213; a claim retries that at once (doc.go, Galera).
	Galera bool
}

// String returns e.g. "MariaDB 10.11.19", or "MariaDB 10.11.19 (Galera)".
func (s Server) String() string {
	g := ""
	if s.Galera {
		g = " (Galera)"
	}
	return fmt.Sprintf("%s %d.%d.%d%s", s.Flavor, s.Major, s.Minor, s.Patch, g)
}

// AtLeast reports whether the server's version is at least major.minor.patch.
func (s Server) AtLeast(major, minor, patch int) bool {
	if s.Major != major {
		return s.Major > major
	}
	if s.Minor != minor {
		return s.Minor > minor
	}
	return s.Patch >= patch
}

// ErrUnsupportedServer: the server lacks FOR UPDATE SKIP LOCKED (MySQL
// before 8.0.1, MariaDB before 10.6) or is not MySQL-compatible.
var ErrUnsupportedServer = errors.New("dbq: mysql: server not supported (need MySQL 8.0.1+ or MariaDB 10.6+)")

// parseVersion reads SELECT VERSION(): "8.4.3", "8.0.36-28" (Percona),
// "10.11.19-MariaDB-0+deb12u1", "5.5.5-10.6.12-MariaDB" (MariaDB behind
// some proxies).
func parseVersion(v string) (Server, error) {
	s := Server{Version: v, Flavor: MySQL}
	num := v
	switch lower := strings.ToLower(v); {
	case strings.Contains(lower, "tidb"):
		s.Flavor = TiDB
		num = v[strings.Index(lower, "tidb")+len("tidb"):]
		num = strings.TrimLeft(num, "-v")
	case strings.Contains(lower, "mariadb"):
		s.Flavor = MariaDB
		num = strings.TrimPrefix(num, "5.5.5-")
	}
	if i := strings.IndexFunc(num, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
		num = num[:i]
	}
	parts := strings.Split(num, ".")
	if len(parts) < 2 {
		return s, fmt.Errorf("%w: cannot read version %q", ErrUnsupportedServer, v)
	}
	nums := make([]int, 3)
	for i := 0; i < len(parts) && i < 3; i++ {
		n, err := strconv.Atoi(parts[i])
		if err != nil {
			return s, fmt.Errorf("%w: cannot read version %q", ErrUnsupportedServer, v)
		}
		nums[i] = n
	}
	s.Major, s.Minor, s.Patch = nums[0], nums[1], nums[2]
	return s, nil
}

// check reports whether the dialect's SQL runs on s.
func (s Server) check() error {
	ok := s.AtLeast(8, 0, 1)
	switch s.Flavor {
	case MariaDB:
		ok = s.AtLeast(10, 6, 0)
	case TiDB:
		ok = s.AtLeast(6, 0, 0) // run here on 8.5.3 only; no older TiDB considered
	}
	if !ok {
		return fmt.Errorf("%w: found %s (%s)", ErrUnsupportedServer, s, s.Version)
	}
	return nil
}

// isolationVar is the system variable that sets the session's isolation
// level in a DSN: MariaDB before 11.1 knows only tx_isolation, MySQL since
// 8.0.3 only transaction_isolation.
func (s Server) isolationVar() string {
	if s.Flavor == MariaDB && !s.AtLeast(11, 1, 0) {
		return "tx_isolation"
	}
	return "transaction_isolation"
}

// candidateIsolation is the isolation level of a claimer's session, where
// its candidate selects run: READ UNCOMMITTED (see doc.go, "Dirty
// candidates"), or READ COMMITTED on TiDB, which refuses READ UNCOMMITTED
// (error 8048) and whose READ COMMITTED takes no locks on a plain read.
func (s Server) candidateIsolation() string {
	if s.Flavor == TiDB {
		return "READ COMMITTED"
	}
	return "READ UNCOMMITTED"
}

// readServer reads what the dialect needs to know about the server, and
// the session's default database ("" when none is selected).
func readServer(ctx context.Context, db *sql.DB, stmts *statements) (Server, string, error) {
	var (
		version  string
		database sql.NullString
		s        Server
	)
	err := db.QueryRowContext(ctx, stmts.get(sqlServer, 0)).Scan(&version, &s.AutoincLockMode,
		&s.AutoincIncrement, &s.MaxAllowedPacket, &database)
	if err != nil {
		return s, "", fmt.Errorf("dbq: mysql: reading the server version: %w", err)
	}
	v, err := parseVersion(version)
	if err != nil {
		return s, "", err
	}
	v.AutoincLockMode, v.AutoincIncrement, v.MaxAllowedPacket = s.AutoincLockMode, s.AutoincIncrement, s.MaxAllowedPacket
	if v.AutoincIncrement < 1 {
		v.AutoincIncrement = 1
	}
	if v.Galera, err = readWsrep(ctx, db, stmts); err != nil {
		return v, "", err
	}
	return v, database.String, v.check()
}

// readWsrep reports whether @@wsrep_on is ON (no row: no wsrep at all).
func readWsrep(ctx context.Context, db *sql.DB, stmts *statements) (bool, error) {
	rows, err := db.QueryContext(ctx, stmts.get(sqlServerWsrep, 0))
	if err != nil {
		return false, fmt.Errorf("dbq: mysql: reading wsrep_on: %w", err)
	}
	defer rows.Close()
	on := false
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return false, fmt.Errorf("dbq: mysql: reading wsrep_on: %w", err)
		}
		on = on || strings.EqualFold(value, "ON") || value == "1"
	}
	return on, rows.Err()
}
