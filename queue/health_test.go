package queue_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/dbqueue/dbq/internal/memq"
	"github.com/dbqueue/dbq/queue"
	"github.com/dbqueue/dbq/sqlite"
)

// reportingDriver is a driver that reports a fixed Health.
type reportingDriver struct {
	queue.Driver
	h queue.Health
}

func (d reportingDriver) Health(context.Context) (queue.Health, error) { return d.h, nil }

// TestHealthUnsupported: a driver without a report — memq, SQLite — gives
// ErrUnsupported and adds no probe to Check; one with a report gives it.
func TestHealthUnsupported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "h.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	if err := sqlite.Migrate(ctx, lite.Driver().(*sqlite.Driver).DB(), sqlite.Config{}); err != nil {
		t.Fatal(err)
	}
	mem, _ := queue.New(memq.New(time.Minute).Driver(), queue.Config{})
	for _, q := range []*queue.Queue{lite, mem} {
		if _, err := q.Health(ctx); !errors.Is(err, queue.ErrUnsupported) {
			t.Errorf("%s: Health: %v, want ErrUnsupported", q.Dialect(), err)
		}
		for _, r := range queue.Check(ctx, q) {
			if r.Name == "horizon" || r.Name == "dead rows" {
				t.Errorf("%s: Check ran the %s probe", q.Dialect(), r.Name)
			}
		}
	}
	want := queue.Health{Table: queue.TableHealth{DeadRows: 3}}
	q, _ := queue.New(reportingDriver{memq.New(time.Minute).Driver(), want}, queue.Config{})
	if got, err := q.Health(ctx); err != nil || got.Table != want.Table {
		t.Errorf("Health = %+v, %v; want %+v", got, err, want)
	}
	q.Close()
	if _, err := q.Health(ctx); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Health after Close: %v", err)
	}
}

// TestHealthOldest: the oldest holder is the one open longest, a holder
// with no time (a slot) counts by its XID age, and a logical slot's
// catalog_xmin holds only the catalogs.
func TestHealthOldest(t *testing.T) {
	t.Parallel()
	now := time.Now()
	session := queue.HorizonHolder{Kind: queue.HolderSession, PID: 42, State: "idle in transaction",
		Application: "report", User: "app", Since: now.Add(-3 * time.Minute), Age: 3 * time.Minute, XIDAge: 50}
	prepared := queue.HorizonHolder{Kind: queue.HolderPrepared, Name: "tx1", Since: now.Add(-time.Minute), Age: time.Minute, XIDAge: 70}
	logical := queue.HorizonHolder{Kind: queue.HolderSlot, Name: "sub", State: "inactive", XIDAge: 900, CatalogOnly: true}
	physical := queue.HorizonHolder{Kind: queue.HolderSlot, Name: "r1", State: "active", XIDAge: 80}

	h := queue.Health{At: now, Holders: []queue.HorizonHolder{logical, physical, prepared, session}}
	if old, ok := h.Oldest(); !ok || old.PID != 42 {
		t.Errorf("Oldest = %+v, %v; want the session open 3m", old, ok)
	}
	if h.XIDAge() != 80 {
		t.Errorf("XIDAge = %d, want 80 (the logical slot holds only the catalogs)", h.XIDAge())
	}
	want := `held longest by session pid 42 (idle in transaction, application "report", user app), open 3m0s, xid age 50`
	if got := h.HorizonSummary(); got != want {
		t.Errorf("HorizonSummary:\n got %s\nwant %s", got, want)
	}
	if old, ok := (queue.Health{Holders: []queue.HorizonHolder{logical, physical}}).Oldest(); !ok || old.Name != "r1" {
		t.Errorf("Oldest of two slots = %+v, %v; want r1", old, ok)
	}
	if _, ok := (queue.Health{Holders: []queue.HorizonHolder{logical}}).Oldest(); ok {
		t.Error("a logical slot's catalog_xmin is taken for the jobs table's horizon")
	}
	if got := (queue.Health{}).HorizonSummary(); got != "nothing holds it back" {
		t.Errorf("HorizonSummary of nothing: %s", got)
	}
	tab := queue.Health{At: now, Table: queue.TableHealth{DeadRows: 10, LiveRows: 5, LastAutovacuum: now.Add(-time.Minute)}}
	if got := tab.TableSummary(); got != "about 10 dead and 5 live rows; last autovacuum 1m0s ago, last autoanalyze never" {
		t.Errorf("TableSummary: %s", got)
	}
}

// TestTooManyDead: dead rows warn past max(DeadRowsWarn, 2 × live).
func TestTooManyDead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dead, live int64
		want       bool
	}{
		{0, 0, false},
		{queue.DeadRowsWarn, 0, false},
		{queue.DeadRowsWarn + 1, 0, true},
		{queue.DeadRowsWarn + 1, queue.DeadRowsWarn, false},
		{1_000_000, 500_000, false},
		{1_000_001, 500_000, true},
	} {
		if got := (queue.TableHealth{DeadRows: tc.dead, LiveRows: tc.live}).TooManyDead(); got != tc.want {
			t.Errorf("TooManyDead(dead %d, live %d) = %v, want %v", tc.dead, tc.live, got, tc.want)
		}
	}
}
