package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteJSON writes rows as one JSON object per line, so the rows of
// several programs (dbq, River) concatenate into one stream.
func WriteJSON(w io.Writer, rows []Row) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// ReadJSON reads what WriteJSON wrote.
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

// TunedCase is the case of another library's drain row run in that
// library's own tuned configuration (bench/river: River's `river bench`
// settings); the ratio lines compare dbq with it.
const TunedCase = "tuned"

// dbqDrainSettings names the settings of dbq's drain row r (drainDBQ),
// for the ratio lines. Rows written before they carried their batch had
// the defaults.
func dbqDrainSettings(r Row) string {
	batch, conc := r.Batch, r.Concurrency
	if batch == 0 {
		batch = defaultDrainBatch
	}
	if conc == 0 {
		conc = batch
	}
	return fmt.Sprintf("Workers (one claimer and connection each) of Concurrency %d, BatchSize %d, PollInterval %v",
		conc, batch, drainPoll)
}

// WriteRatios prints, per dialect and dbq strategy, dbq's best drain over
// the drain of each other library (River) in its tuned configuration,
// naming both sides' settings. A library without a tuned row is compared
// by its best row, and the line says so.
func WriteRatios(w io.Writer, rows []Row) {
	type key struct{ dialect, impl string }
	best := map[key]Row{} // per dialect and other library
	var others []key
	for _, r := range rows {
		if r.Section != Drain || r.PerSec <= 0 || r.Impl == "dbq" || r.Impl == "floor" {
			continue
		}
		k := key{r.Dialect, r.Impl}
		b, ok := best[k]
		if !ok {
			others = append(others, k)
		}
		if !ok || better(r, b) {
			best[k] = r
		}
	}
	for _, k := range others {
		o := best[k]
		which := "its tuned configuration"
		if o.Case != TunedCase {
			which = "its best row, " + o.Case + " (no tuned row)"
		}
		dbqBest := map[string]Row{}
		var strategies []string
		for _, r := range rows {
			if r.Section == Drain && r.Impl == "dbq" && r.Dialect == k.dialect && r.PerSec > 0 {
				if b, ok := dbqBest[r.Strategy]; !ok || r.PerSec > b.PerSec {
					if !ok {
						strategies = append(strategies, r.Strategy)
					}
					dbqBest[r.Strategy] = r
				}
			}
		}
		for _, s := range strategies {
			d := dbqBest[s]
			fmt.Fprintf(w, "%s drain: dbq %s %.0f jobs/s (best: %s; %s) = %.2f× %s %.0f jobs/s (%s: %s)\n",
				k.dialect, s, d.PerSec, d.Case, dbqDrainSettings(d), d.PerSec/o.PerSec, k.impl, o.PerSec, which, o.Strategy)
		}
	}
}

// better says whether r is a better comparison row than b: a tuned row
// wins over any other, else the faster.
func better(r, b Row) bool {
	if rt, bt := r.Case == TunedCase, b.Case == TunedCase; rt != bt {
		return rt
	}
	return r.PerSec > b.PerSec
}

// WriteTable prints rows as an aligned table, each throughput beside the
// floor of the same dialect, section and case as a percentage, and then
// the ratio lines (WriteRatios).
func WriteTable(w io.Writer, rows []Row) error {
	floor := map[[3]string]float64{}
	for _, r := range rows {
		if r.Impl == "floor" {
			floor[[3]string{r.Dialect, r.Section, r.Case}] = r.PerSec
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "dialect\tsection\timpl\tstrategy\tcase\tjobs/s\tof floor\tp50 ms\tp99 ms\terror\t")
	for _, r := range rows {
		per, pct, p50, p99 := "", "", "", ""
		if r.PerSec > 0 {
			per = fmt.Sprintf("%.0f", r.PerSec)
			if f := floor[[3]string{r.Dialect, r.Section, r.Case}]; f > 0 && r.Impl != "floor" {
				pct = fmt.Sprintf("%.0f%%", 100*r.PerSec/f)
			}
		}
		if r.P50ms > 0 || r.P99ms > 0 {
			p50, p99 = fmt.Sprintf("%.2f", r.P50ms), fmt.Sprintf("%.2f", r.P99ms)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			r.Dialect, r.Section, r.Impl, r.Strategy, r.Case, per, pct, p50, p99, r.Err)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	WriteRatios(w, rows)
	return nil
}
