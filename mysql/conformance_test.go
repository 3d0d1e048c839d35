package mysql

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/integration"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/queue"
	"github.com/pressly/goose/v3"
)

// TestConformance runs the dbq conformance suite against the MySQL or
// MariaDB server of DBQ_MYSQL_DSN, each subtest in a database of its own;
// when DBQ_MYSQL_DSNS lists the nodes of a Galera cluster, against each
// node in turn (galera_test.go).
func TestConformance(t *testing.T) {
	admin(t) // skips, or fails under DBQ_REQUIRE=mysql, when the server does not answer
	galera := len(galeraDSNs()) > 1
	if galera {
		t.Logf("Galera: queues opened on %d nodes in turn (DBQ_MYSQL_DSNS)", len(galeraNodes(t)))
	}
	integration.Run(t, integration.Harness{
		Dialect: string(dialect.MySQL),
		NewQueue: func(t *testing.T, cfg queue.Config, migrate bool) *queue.Queue {
			open := openQueue
			if galera {
				open = galeraQueue // each queue on the next node (galera_test.go)
			}
			q, d := open(t, Config{Config: cfg}, migrate)
			d.trackTokens = true
			return q
		},
		Migrator: func(t *testing.T, q *queue.Queue) *goose.Provider {
			p, err := migrations.NewProvider(context.Background(), dialect.MySQL, q.Driver().(*Driver).DB(), q.Config().Names())
			if err != nil {
				t.Fatal(err)
			}
			return p
		},
		// A killed process: its session is killed from another one, so
		// nothing ends its claims; they come back when the lease expires.
		Kill: func(t *testing.T, c queue.Claimer) {
			if galera {
				galeraKill(t, c.(*Claimer))
				return
			}
			killConn(t, sessionOf(c))
		},
		// A lease dialect holds no locks between calls; what it holds in
		// the database are the rows claimed under its tokens, and those
		// must be exactly the jobs it claimed and still holds.
		HeldLocks: func(t *testing.T, c queue.Claimer) []int64 {
			return claimedWithTokens(t, c.(*Claimer))
		},
		Leftovers: func(t *testing.T, c queue.Claimer) []string {
			if galera {
				return galeraOpenTrx(t, c.(*Claimer))
			}
			return openTrx(t, sessionOf(c))
		},
		InsertRaw: insertRaw,
		Tx:        beginTx,
		// New on a *sql.DB of the user's, with room for a claimer and its
		// completions; every connection it holds stays idle in it.
		UserPool: func(t *testing.T, cfg queue.Config) (*queue.Queue, func(*testing.T) []map[string]string) {
			const size = 4
			db, _ := userPool(t, size, Config{Config: cfg})
			q := newOn(t, db, Config{Config: cfg})
			srv := q.Driver().(*Driver).Server()
			return q, func(t *testing.T) []map[string]string { return poolSessions(t, db, srv, size, "") }
		},
	})
}

func sessionOf(c queue.Claimer) int64 {
	mc := c.(*Claimer)
	mc.mu.Lock()
	defer mc.mu.Unlock()
	return mc.connID
}

// claimedWithTokens lists the rows claimed with any token c ever wrote.
func claimedWithTokens(t *testing.T, c *Claimer) []int64 {
	t.Helper()
	c.heldMu.Lock()
	var tokens []any
	for tok := range c.issued {
		tokens = append(tokens, tok)
	}
	c.heldMu.Unlock()
	if len(tokens) == 0 {
		return nil
	}
	q := fmt.Sprintf("SELECT id FROM %s WHERE state = 'claimed' AND claim_token IN (%s)",
		c.d.stmts.jobsTable, strings.TrimSuffix(strings.Repeat("?,", len(tokens)), ","))
	ids, err := dialect.QueryIDs(context.Background(), c.d.db, q, tokens...)
	if err != nil {
		t.Fatalf("claimed rows: %v", err)
	}
	slices.Sort(ids)
	return ids
}

// beginTx begins a transaction on q's pool as an application does, with
// the server's default isolation; the test's end rolls back what its
// commit did not end.
func beginTx(t *testing.T, q *queue.Queue) (any, func() error) {
	t.Helper()
	tx, err := q.Driver().(*Driver).DB().BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx, tx.Commit
}

// insertRaw inserts a job as a producer does from the mysql client:
// DATETIME(6) holds UTC wall-clock time.
func insertRaw(t *testing.T, q *queue.Queue, cols map[string]any) {
	t.Helper()
	if at, ok := cols["run_at"].(time.Time); ok {
		cols["run_at"] = at.UTC()
	}
	if q.Driver().(*Driver).Server().Flavor == TiDB {
		// TiDB takes no time function as a default (00003): there the
		// contract has producers set the times themselves, in UTC.
		now := time.Now().UTC()
		if _, ok := cols["run_at"]; !ok {
			cols["run_at"] = now
		}
		cols["created_at"] = now
	}
	n := q.Config().Names()
	stmt, args := integration.InsertStatement(n.Qualified(dialect.MySQL, n.Jobs()), cols, func(int) string { return "?" })
	if _, err := q.Driver().(*Driver).DB().ExecContext(context.Background(), stmt, args...); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}
