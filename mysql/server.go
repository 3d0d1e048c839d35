package mysql

import (
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
)

// Server describes the database server a Driver talks to, as New found it.
type Server struct {
	Flavor              Flavor
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
}

// String returns e.g. "MariaDB 10.11.19".
func (s Server) String() string {
	return fmt.Sprintf("%s %d.%d.%d", s.Flavor, s.Major, s.Minor, s.Patch)
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
	if strings.Contains(strings.ToLower(v), "mariadb") {
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
	if s.Flavor == MariaDB {
		ok = s.AtLeast(10, 6, 0)
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
