package integration

import (
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/pressly/goose/v3"
)

// Harness is what a dialect gives the suite. NewQueue, Kill and, for any
// real database, Migrator are required.
type Harness struct {
	// Dialect names the database under test, e.g. "postgres".
	Dialect string

	// NewQueue returns a Queue over tables of its own — a fresh schema,
	// database, prefix or file — dropped at t's cleanup, and closes the
	// Queue then. cfg.Schema and cfg.Prefix are the harness's to choose.
	// With migrate false the tables are not created, so every operation
	// must fail with queue.ErrNotMigrated.
	NewQueue func(t *testing.T, cfg queue.Config, migrate bool) *queue.Queue

	// Migrator returns the goose provider for q's tables. The suite runs it
	// up, down to zero and up again.
	Migrator func(t *testing.T, q *queue.Queue) *goose.Provider

	// Kill makes c die the way a killed process does: its connection is
	// cut with no statement ending its claims (for SQLite, c is simply
	// abandoned). Later calls on c may fail; the suite does not close it.
	Kill func(t *testing.T, c queue.Claimer)

	// LockBased is true when a claim is a lock that ends with the claimer's
	// connection (PostgreSQL advisory locks): a killed claimer's jobs come
	// back at once instead of after the lease.
	LockBased bool

	// HeldLocks, when set, returns the IDs of the jobs whose locks c holds
	// in the database (for advisory locks, from pg_locks). The suite
	// checks they are exactly the jobs c claimed and still holds.
	HeldLocks func(t *testing.T, c queue.Claimer) []int64

	// Leftovers, when set, describes anything c leaves open in the
	// database besides the claims it holds: open transactions, stray
	// locks. The suite requires it to be empty after a cancelled Claim.
	Leftovers func(t *testing.T, c queue.Claimer) []string

	// ClaimWindow is, for a claim that picks its jobs at random among the
	// first ClaimWindow ready ones (SQL Server's DeleteTop), that window;
	// the fairness case allows the oldest job a wait that grows with it.
	// 0 for claims in order.
	ClaimWindow int

	// UserPool, when set, returns a Queue made by the dialect's constructor
	// on a connection pool the test made as an application makes its own
	// (tables of its own, migrated, dropped at t's cleanup; room for a
	// Worker), and sessions, which reads the settings of every connection
	// that pool holds — holding them all at once, so that each idle one is
	// read — as one map of setting name to value per connection: isolation
	// level, lock and statement timeouts, whatever a dialect could leave
	// behind. The suite checks that dbq leaves them as it found them.
	UserPool func(t *testing.T, cfg queue.Config) (q *queue.Queue, sessions func(t *testing.T) []map[string]string)
	// NoUserPool says why a harness without UserPool has none (no pool at
	// all; another harness of the dialect runs the case). A harness with
	// neither fails LeavesPoolSessionsAsFound.
	NoUserPool string

	// InsertRaw, when set, inserts one job into q's jobs table with a plain
	// SQL INSERT naming exactly the columns of cols, as a producer in
	// another language does (README, "Producers in other languages"): the
	// dialect's table name and placeholders, and its storage of each value —
	// queue (string), payload ([]byte), priority (int), run_at (time.Time,
	// stored as the dialect stores times), max_attempts (int), dedupe_key
	// (string; on SQL Server also recorded in the dedupe table, in the same
	// transaction). Every other column is left to its default. The producer
	// case needs it; a harness without it fails that case.
	InsertRaw func(t *testing.T, q *queue.Queue, cols map[string]any)

	// Tx, when set, begins a transaction on q's database as an application
	// does — a pgx.Tx or *sql.Tx, whatever q.EnqueueTx takes — and returns
	// it with its commit. The typed-jobs case needs it; a harness without
	// it fails that case.
	Tx func(t *testing.T, q *queue.Queue) (tx any, commit func() error)

	// LeaseSlack is added to every wait for a lease to expire, for
	// databases whose clock is coarse. Default 0.
	LeaseSlack time.Duration
}
