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

// WriteTable prints rows as an aligned table, each throughput beside the
// floor of the same dialect, section and case as a percentage.
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
	return tw.Flush()
}
