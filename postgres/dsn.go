package postgres

import (
	"strings"

	"github.com/dbqueue/dbq/dialect"
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
// pool has at least [DefaultMaxConns] connections. It also returns the DSN
// as dialect.NewDSN reads it, to build messages from. A URL pgx would
// read otherwise than net/url (an unescaped '@' in the password) is
// refused first. Errors are *dialect.DSNError (queue.ErrInvalidConfig)
// and hold neither the DSN's password nor pgx's text where it quotes it.
func parseDSN(dsn string) (*pgxpool.Config, *dialect.DSN, error) {
	ds, err := dialect.NewDSN(dsn)
	if err != nil {
		return nil, nil, err
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, nil, ds.BadDSN("postgres", err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		pc.MaxConns = max(pc.MaxConns, DefaultMaxConns)
	}
	return pc, ds, nil
}
