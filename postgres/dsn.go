package postgres

import (
	"fmt"
	"strings"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultMaxConns is the pool size [Open] uses when the DSN sets no
// pool_max_conns: each advisory claimer keeps one connection for its life,
// so pgx's default of max(4, CPUs) is easily too small.
const DefaultMaxConns = 16

// parseDSN reads a PostgreSQL DSN as pgx does — a postgres:// or
// postgresql:// URL, or a libpq key=value string, with pgx's own keys
// (pool_max_conns, default_query_exec_mode …) — into the config of the
// pool [Open] makes, or of the connections [OpenDB] makes
// (Config.ConnConfig, without the pool's keys). Without pool_max_conns the
// pool has at least [DefaultMaxConns] connections. Errors wrap
// queue.ErrInvalidConfig and hold neither the DSN's password nor pgx's
// error (which holds the parsed config).
func parseDSN(dsn string) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: bad DSN %s: %s",
			queue.ErrInvalidConfig, dialect.Redact(dsn), dialect.Redact(err.Error()))
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		pc.MaxConns = max(pc.MaxConns, DefaultMaxConns)
	}
	return pc, nil
}
