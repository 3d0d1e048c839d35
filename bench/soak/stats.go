package soak

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// sampler reads the server's view of the jobs table on a connection of its
// own.
type sampler struct {
	conn  *pgx.Conn
	table string
}

func newSampler(ctx context.Context, dsn, table string) (*sampler, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	return &sampler{conn: conn, table: table}, nil
}

func (s *sampler) close() { s.conn.Close(context.Background()) }

// sampleSQL reads the jobs table's statistics and sizes, and the backend
// whose snapshot is oldest (the MVCC horizon vacuum cannot pass), leaving
// out the sampler's own. pg_stat_user_tables lags by the statistics flush
// interval (about a second).
const sampleSQL = `
SELECT coalesce(s.n_dead_tup, 0), coalesce(s.n_live_tup, 0),
       coalesce(s.autovacuum_count, 0), coalesce(s.autoanalyze_count, 0),
       pg_relation_size($1::regclass), pg_indexes_size($1::regclass),
       coalesce(h.xmin_age, 0), coalesce(h.held_s, 0)
FROM (SELECT 1) AS one
LEFT JOIN pg_stat_user_tables AS s ON s.relid = $1::regclass
LEFT JOIN LATERAL (
	SELECT age(backend_xmin)::int8 AS xmin_age,
	       greatest(extract(epoch FROM clock_timestamp() - xact_start), 0)::float8 AS held_s
	FROM pg_stat_activity
	WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
	ORDER BY age(backend_xmin) DESC
	LIMIT 1
) AS h ON true`

func (s *sampler) sample(ctx context.Context, r *Row) error {
	return s.conn.QueryRow(ctx, sampleSQL, s.table).Scan(
		&r.DeadTup, &r.LiveTup, &r.Autovacuums, &r.Autoanalyzes,
		&r.TableBytes, &r.IndexBytes, &r.XminAge, &r.XminHeldS)
}

// setClaims sets the row's claim count and percentiles from the window's
// claim latencies.
func (r *Row) setClaims(lat []time.Duration) {
	r.Claims = len(lat)
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Millisecond)
	}
	r.ClaimP50ms, r.ClaimP99ms = at(0.50), at(0.99)
}
