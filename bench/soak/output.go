package soak

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// Row is one window of one scenario of one target: rates over the window,
// everything else as it stood at the window's end (T).
type Row struct {
	Impl     string `json:"impl"`              // dbq, river
	Claimer  string `json:"claimer,omitempty"` // dbq's claim strategy
	Settings string `json:"settings"`          // the target's configuration, in words
	Scenario string `json:"scenario"`

	T       float64 `json:"t_s"`               // seconds since the scenario started
	Holding bool    `json:"holding,omitempty"` // the horizon snapshot is held
	Target  float64 `json:"target_per_s,omitempty"`
	Offered float64 `json:"offered_per_s"` // jobs enqueued (committed) per second
	Drained float64 `json:"drained_per_s"` // completions written per second
	Backlog int64   `json:"backlog"`       // enqueued minus completed so far

	Claims     int     `json:"claims"` // claims (River: fetches) in the window
	ClaimP50ms float64 `json:"claim_p50_ms,omitempty"`
	ClaimP99ms float64 `json:"claim_p99_ms,omitempty"`

	DeadTup      int64   `json:"dead_tup"` // pg_stat_user_tables.n_dead_tup
	LiveTup      int64   `json:"live_tup"`
	TableBytes   int64   `json:"table_bytes"` // pg_relation_size
	IndexBytes   int64   `json:"index_bytes"` // pg_indexes_size
	XminAge      int64   `json:"xmin_age"`    // age(backend_xmin) of the oldest snapshot, in transactions
	XminHeldS    float64 `json:"xmin_held_s"` // how long that backend's transaction has been open
	Autovacuums  int64   `json:"autovacuums"` // pg_stat_user_tables.autovacuum_count
	Autoanalyzes int64   `json:"autoanalyzes"`

	Err string `json:"error,omitempty"`
}

// Label names the target: impl and claimer.
func (r Row) Label() string {
	if r.Claimer == "" {
		return r.Impl
	}
	return r.Impl + " " + r.Claimer
}

// ReadJSON reads rows written one JSON object a line (a json.Encoder's
// output), so the rows of several programs concatenate into one stream.
func ReadJSON(r io.Reader) ([]Row, error) {
	var rows []Row
	dec := json.NewDecoder(r)
	for dec.More() {
		var row Row
		if err := dec.Decode(&row); err != nil {
			return rows, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// Header is the table's heading line; Line formats a row under it.
const Header = "target\tscenario\tt s\thold\toffered/s\tdrained/s\tbacklog\tclaim p50 ms\tp99 ms\tdead tup\ttable MB\tidx MB\txmin age\theld s\tvac/an\terror\t"

// Line formats r as a tab-separated line under Header.
func (r Row) Line() string {
	h := ""
	if r.Holding {
		h = "held"
	}
	p50, p99 := "", ""
	if r.Claims > 0 {
		p50, p99 = fmt.Sprintf("%.2f", r.ClaimP50ms), fmt.Sprintf("%.2f", r.ClaimP99ms)
	}
	const mb = 1 << 20
	return fmt.Sprintf("%s\t%s\t%.0f\t%s\t%.0f\t%.0f\t%d\t%s\t%s\t%d\t%.1f\t%.1f\t%d\t%.0f\t%d/%d\t%s\t",
		r.Label(), r.Scenario, r.T, h, r.Offered, r.Drained, r.Backlog, p50, p99,
		r.DeadTup, float64(r.TableBytes)/mb, float64(r.IndexBytes)/mb, r.XminAge, r.XminHeldS,
		r.Autovacuums, r.Autoanalyzes, r.Err)
}

// WriteTable prints rows as an aligned table, with each target's settings
// once above its rows.
func WriteTable(w io.Writer, rows []Row) error {
	seen := map[string]bool{}
	for _, r := range rows {
		if !seen[r.Label()] {
			seen[r.Label()] = true
			fmt.Fprintf(w, "%s: %s\n", r.Label(), r.Settings)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, Header)
	for _, r := range rows {
		fmt.Fprintln(tw, r.Line())
	}
	return tw.Flush()
}

// String renders r as one progress line.
func (r Row) String() string {
	if r.Err != "" {
		return fmt.Sprintf("%-15s %-7s error: %s", r.Label(), r.Scenario, r.Err)
	}
	h := ""
	if r.Holding {
		h = "held"
	}
	const mb = 1 << 20
	return fmt.Sprintf("%-15s %-7s %4.0fs %-4s offered %6.0f/s drained %6.0f/s backlog %7d claim p50 %6.2fms p99 %7.2fms dead %8d table %6.1fMB idx %6.1fMB xmin age %7d held %4.0fs vac/an %d/%d",
		r.Label(), r.Scenario, r.T, h, r.Offered, r.Drained, r.Backlog, r.ClaimP50ms, r.ClaimP99ms,
		r.DeadTup, float64(r.TableBytes)/mb, float64(r.IndexBytes)/mb, r.XminAge, r.XminHeldS,
		r.Autovacuums, r.Autoanalyzes)
}
