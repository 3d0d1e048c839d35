package queue

import (
	"context"
	"fmt"
	"time"
)

// Health is what the database says about the conditions a queue table
// lives in: what holds its MVCC horizon back, so that the dead rows of
// completed jobs cannot be removed, and how many dead rows the jobs table
// carries. A held horizon is the slow choke of a queue in a database with
// multi-version rows: every claim walks further over dead index entries
// while the backlog grows. See docs/postgres-health.md.
type Health struct {
	// At is the database's clock when the report was read.
	At time.Time `json:"at"`
	// Holders are what holds the horizon back — sessions with a snapshot
	// or a transaction id, replication slots and prepared transactions —
	// by XIDAge, oldest first, at most MaxHolders of them. Empty when
	// nothing but short statements runs.
	Holders []HorizonHolder `json:"holders"`
	// FullView is true when the account sees every session's state and
	// transaction start (PostgreSQL: pg_read_all_stats, which pg_monitor
	// includes; superusers have it). Without it other roles' sessions are
	// listed with their pid, user, application and XIDAge but no State,
	// Since or Age, so they cannot be judged by time.
	FullView bool `json:"full_view"`
	// Table is the jobs table's row counts and upkeep.
	Table TableHealth `json:"table"`
}

// MaxHolders is the most holders a Health lists.
const MaxHolders = 10

// HolderKind is what holds a horizon.
type HolderKind string

// The holders of a horizon.
const (
	// HolderSession is a client's session: an open transaction, an
	// idle-in-transaction session, a long query, a pg_dump, or a
	// replica's hot_standby_feedback without a slot (its WAL sender).
	HolderSession HolderKind = "session"
	// HolderSlot is a replication slot: a physical one fed by a replica's
	// hot_standby_feedback, or a logical one, whose catalog_xmin holds
	// back the system catalogs only.
	HolderSlot HolderKind = "replication slot"
	// HolderPrepared is a prepared transaction (PREPARE TRANSACTION) not
	// yet committed or rolled back.
	HolderPrepared HolderKind = "prepared transaction"
)

// HorizonHolder is one thing holding a horizon back.
type HorizonHolder struct {
	Kind HolderKind `json:"kind"`
	// PID is a session's server process id; 0 for the other kinds.
	PID int `json:"pid,omitempty"`
	// Name is a slot's name or a prepared transaction's gid; "" for a
	// session.
	Name string `json:"name,omitempty"`
	// State is a session's state ("active", "idle in transaction", "idle
	// in transaction (aborted)"); for a slot "active" or "inactive" (no
	// consumer connected).
	State string `json:"state,omitempty"`
	// Application is a session's application_name; User is the role of a
	// session or prepared transaction.
	Application string `json:"application,omitempty"`
	User        string `json:"user,omitempty"`
	// Since is when a session's transaction began or a transaction was
	// prepared; zero for a slot, for which the database keeps no time.
	Since time.Time `json:"since,omitzero"`
	// Age is how long ago Since was: for a session, an upper bound on its
	// snapshot's age (a READ COMMITTED transaction takes a new snapshot
	// per statement); 0 when Since is zero.
	Age time.Duration `json:"age_ns"`
	// XIDAge is how many transaction ids the database has handed out since
	// the oldest one this holder keeps visible: the gap vacuum cannot
	// close.
	XIDAge int64 `json:"xid_age"`
	// CatalogOnly is true for a logical slot's catalog_xmin, which holds
	// back vacuum of the system catalogs but not of the jobs table.
	CatalogOnly bool `json:"catalog_only,omitempty"`
}

// Holds reports whether h holds back the jobs table's horizon (and not
// only the catalogs').
func (h HorizonHolder) Holds() bool { return !h.CatalogOnly }

// String describes h in one line, for logs and `dbq stats`.
func (h HorizonHolder) String() string {
	var s string
	switch h.Kind {
	case HolderSession:
		s = fmt.Sprintf("session pid %d (%s", h.PID, orDash(h.State))
		if h.Application != "" {
			s += fmt.Sprintf(", application %q", h.Application)
		}
		if h.User != "" {
			s += ", user " + h.User
		}
		s += ")"
	case HolderSlot:
		s = fmt.Sprintf("replication slot %q (%s", h.Name, orDash(h.State))
		if h.CatalogOnly {
			s += ", catalogs only"
		}
		s += ")"
	default:
		s = fmt.Sprintf("%s %q", h.Kind, h.Name)
	}
	if !h.Since.IsZero() {
		s += fmt.Sprintf(", open %s", h.Age.Round(time.Second))
	}
	return s + fmt.Sprintf(", xid age %d", h.XIDAge)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Oldest returns the holder of the jobs table's horizon that has been
// open longest (largest Age; among those with no time, the largest
// XIDAge), and false when nothing holds it.
func (h Health) Oldest() (HorizonHolder, bool) {
	var best HorizonHolder
	found := false
	for _, x := range h.Holders {
		if !x.Holds() {
			continue
		}
		if !found || x.Age > best.Age || (x.Age == best.Age && x.XIDAge > best.XIDAge) {
			best, found = x, true
		}
	}
	return best, found
}

// HorizonSummary says in one line what has held the jobs table's horizon
// back longest ("held longest by session pid …"), or that nothing holds it.
func (h Health) HorizonSummary() string {
	old, ok := h.Oldest()
	if !ok {
		return "nothing holds it back"
	}
	return "held longest by " + old.String()
}

// TableSummary says in one line how many dead and live rows the jobs table
// has and when autovacuum last came by.
func (h Health) TableSummary() string {
	t := h.Table
	return fmt.Sprintf("about %d dead and %d live rows; last autovacuum %s, last autoanalyze %s",
		t.DeadRows, t.LiveRows, ago(t.LastAutovacuum, h.At), ago(t.LastAutoanalyze, h.At))
}

// ago says how long before now t was, or "never".
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return now.Sub(t).Round(time.Second).String() + " ago"
}

// XIDAge is the age in transaction ids of the jobs table's horizon: the
// largest XIDAge of the holders that hold it, 0 when none does.
func (h Health) XIDAge() int64 {
	var n int64
	for _, x := range h.Holders {
		if x.Holds() {
			n = max(n, x.XIDAge)
		}
	}
	return n
}

// TableHealth is the jobs table's row estimates and upkeep, as the
// database's statistics have them: estimates, updated asynchronously.
type TableHealth struct {
	// LiveRows and DeadRows estimate the rows visible to new transactions
	// and those dead but not yet removed by vacuum.
	LiveRows int64 `json:"live_rows"`
	DeadRows int64 `json:"dead_rows"`
	// LastAutovacuum and LastAutoanalyze are when autovacuum last
	// vacuumed and analyzed the table; zero when never (since the
	// statistics were reset). LastVacuum and LastAnalyze are the manual
	// ones.
	LastAutovacuum  time.Time `json:"last_autovacuum,omitzero"`
	LastAutoanalyze time.Time `json:"last_autoanalyze,omitzero"`
	LastVacuum      time.Time `json:"last_vacuum,omitzero"`
	LastAnalyze     time.Time `json:"last_analyze,omitzero"`
}

// DeadRowsWarn is the dead-row count above which [TableHealth.TooManyDead]
// warns, whatever the live rows.
const DeadRowsWarn = 100_000

// TooManyDead reports whether the table carries more dead rows than
// max(DeadRowsWarn, 2 × LiveRows). A queue table always has some: each job
// is a row inserted and deleted, and autovacuum comes by after a fifth of
// the table has changed (its default scale factor). Twice the live rows
// means a claim's index walk visits three entries for each it can use,
// which vacuum at its defaults does not let happen; the floor keeps a
// small or just-drained table, where every row may be dead and a walk is
// still cheap, from warning.
func (t TableHealth) TooManyDead() bool {
	return t.DeadRows > max(DeadRowsWarn, 2*t.LiveRows)
}

// Health reads the database's [Health] report, or returns an error
// wrapping ErrUnsupported when the driver has none ([HealthReporter]).
func (q *Queue) Health(ctx context.Context) (Health, error) {
	if q.closed.Load() {
		return Health{}, ErrClosed
	}
	r, ok := healthReporter(q.drv)
	if !ok {
		return Health{}, fmt.Errorf("%w: %s reports no health", ErrUnsupported, q.drv.Dialect())
	}
	return r.Health(ctx)
}
