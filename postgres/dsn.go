package postgres

import (
	"fmt"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

// DefaultMaxConns is the pool size [Open] uses when the DSN sets no
// pool_max_conns: each advisory claimer keeps one connection for its life,
// so pgx's default of max(4, CPUs) is easily too small.
const DefaultMaxConns = 16

// badDSN is the error for a DSN pgx cannot parse, without its password and
// without wrapping pgx's error (which holds the parsed config).
func badDSN(dsn string, err error) error {
	return fmt.Errorf("%w: postgres: bad DSN %s: %s", queue.ErrInvalidConfig, dialect.Redact(dsn), dialect.Redact(err.Error()))
}
