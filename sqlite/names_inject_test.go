package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/faults"
	"github.com/dbqueue/dbq/migrations"
	"github.com/dbqueue/dbq/queue"
)

// TestHostileNamesChangeNothing: queue names and prefixes built to break
// out of a literal or a quoted identifier — quotes, ';', comments, Unicode
// look-alikes — are refused with their typed error by every entry point,
// before any statement runs, and the database file's schema and rows are
// as they were. SQLite ignores Config.Schema, but a hostile one is refused
// all the same.
func TestHostileNamesChangeNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "victim.db")
	q := newTestQueue(t, path, queue.Config{}, true)
	db := driverOf(t, q).DB()
	ctx := context.Background()
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "victim", Payload: []byte("a")}, queue.NewJob{Queue: "victim", Payload: []byte{0, 1}}); err != nil {
		t.Fatal(err)
	}
	c, err := q.NewClaimer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Claim(ctx, "victim", 1); err != nil {
		t.Fatal(err)
	}
	snapshot := func() string {
		var s, rows string
		if err := db.QueryRow(`SELECT coalesce(group_concat(type || ':' || name || ':' || coalesce(sql, ''), ';'), '')
			FROM (SELECT * FROM sqlite_master ORDER BY type, name)`).Scan(&s); err != nil {
			t.Fatalf("sqlite_master: %v", err)
		}
		if err := db.QueryRow(`SELECT coalesce(group_concat(id || '|' || queue || '|' || state || '|' || hex(payload), ','), '')
			FROM (SELECT * FROM "dbq_jobs" ORDER BY id)`).Scan(&rows); err != nil {
			t.Fatalf("rows: %v", err)
		}
		return s + " / " + rows
	}
	before := snapshot()

	faults.RefuseHostileQueues(t, q, c)

	for _, id := range faults.HostileIdentifiers {
		for _, cfg := range []queue.Config{{Schema: id}, {Prefix: id}} {
			what := fmt.Sprintf("schema %q prefix %q", cfg.Schema, cfg.Prefix)
			_, err := New(db, Config{Config: cfg})
			wantIdentErr(t, "New with "+what, err)
			wantIdentErr(t, "Migrate with "+what, Migrate(ctx, db, Config{Config: cfg}))
			_, err = Open(ctx, path, Config{Config: cfg})
			wantIdentErr(t, "Open with "+what, err)
			_, err = migrations.NewProvider(ctx, dialect.SQLite, db, dialect.Names{Schema: cfg.Schema, Prefix: cfg.Prefix})
			wantIdentErr(t, "migrations.NewProvider with "+what, err)
		}
	}
	if after := snapshot(); after != before {
		t.Errorf("the database changed:\nbefore %s\nafter  %s", before, after)
	}
}

func wantIdentErr(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, queue.ErrInvalidIdentifier) {
		t.Errorf("%s: %v, want ErrInvalidIdentifier", what, err)
	}
}

// TestOddButValidNames: valid but odd prefixes — mixed case, a leading
// underscore, the longest allowed — and queue names that look like SQL
// work end to end, migrations included (twice), and the tables carry
// exactly the names asked for.
func TestOddButValidNames(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "odd.db")
	for _, prefix := range []string{"Odd_Prefix_", "_", strings.Repeat("p", dialect.MaxPrefixLen)} {
		cfg := queue.Config{Prefix: prefix}
		q := newTestQueue(t, path, cfg, true)
		if err := Migrate(context.Background(), driverOf(t, q).DB(), Config{Config: cfg}); err != nil {
			t.Fatalf("second Migrate(prefix %q): %v", prefix, err)
		}
		c, err := q.NewClaimer(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range faults.OddQueueNames {
			faults.RoundTrip(t, q, c, name, []byte("payload of "+name), "")
		}
		_ = c.Close(context.Background())
		var n int
		err = driverOf(t, q).DB().QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN (?, ?)`,
			prefix+"jobs", prefix+"schema_version").Scan(&n)
		if err != nil || n != 2 {
			t.Fatalf("found %d of the tables %sjobs, %sschema_version (%v)", n, prefix, prefix, err)
		}
	}
}
