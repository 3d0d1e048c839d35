package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestPipelinedChained: a chained step shares the next step's implicit
// transaction — a transaction-local setting it makes holds there and ends
// with it — and a server error in either step fails both, while the steps
// before and after them run on their own, their rows read right.
func TestPipelinedChained(t *testing.T) {
	ctx := testCtx(t)
	pooled, err := testPool(t).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pooled.Release()
	conn := pooled.Conn()
	setting := func(got *string) func(pgx.Rows) error {
		return func(rows pgx.Rows) error {
			for rows.Next() {
				if err := rows.Scan(got); err != nil {
					return err
				}
			}
			return rows.Err()
		}
	}
	const set = "SELECT set_config('dbq.pipeline_test', 'on', true)"
	const get = "SELECT coalesce(current_setting('dbq.pipeline_test', true), '')"

	var inTx, after string
	errs := pipelined(ctx, conn, []step{
		{sql: set, chained: true},
		{sql: get, read: setting(&inTx)},
	})
	errs = append(errs, pipelined(ctx, conn, []step{{sql: get, read: setting(&after)}})...)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if inTx != "on" || after != "" {
		t.Fatalf("the setting read %q in the chained transaction (want on) and %q after it (want empty)", inTx, after)
	}

	for _, c := range []struct {
		name        string
		first, then string
	}{
		{"FirstFails", "SELECT 1/0", "SELECT 1"},
		{"SecondFails", "SELECT 1", "SELECT 1/0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ran, after string
			var n int64
			errs := pipelined(ctx, conn, []step{
				{sql: "SELECT 'ran'", read: setting(&ran)},
				{sql: c.first, chained: true},
				{sql: c.then},
				// After the failed transaction: other columns than the
				// skipped step's, read right.
				{sql: "SELECT 'after'", read: setting(&after)},
				{sql: "SELECT 7::int8", read: func(rows pgx.Rows) error {
					for rows.Next() {
						if err := rows.Scan(&n); err != nil {
							return err
						}
					}
					return rows.Err()
				}},
			})
			if errs[0] != nil || ran != "ran" {
				t.Fatalf("the step before the failed transaction: %v, read %q", errs[0], ran)
			}
			if errs[1] == nil || errs[2] == nil {
				t.Fatalf("a failed transaction's steps report %v and %v; want an error for both", errs[1], errs[2])
			}
			if errs[3] != nil || errs[4] != nil || after != "after" || n != 7 {
				t.Fatalf("the steps after the failed transaction: %v, %v, read %q and %d", errs[3], errs[4], after, n)
			}
			if status := conn.PgConn().TxStatus(); status != 'I' {
				t.Fatalf("the connection is left in transaction status %q", status)
			}
			// The connection serves the next pipeline as before.
			var inTx string
			if errs := pipelined(ctx, conn, []step{{sql: set, chained: true}, {sql: get, read: setting(&inTx)}}); errs[0] != nil || errs[1] != nil || inTx != "on" {
				t.Fatalf("the next pipeline: %v, read %q", errs, inTx)
			}
		})
	}

}
