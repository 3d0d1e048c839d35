package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5/pgtype"
)

var (
	_ queue.HealthReporter = (*Driver)(nil)
	_ queue.Checker        = (*Driver)(nil)
)

// DefaultHorizonWarn is Config.HorizonWarn's default.
const DefaultHorizonWarn = 5 * time.Minute

// Health reads what holds the database's MVCC horizon back
// (health_holders.sql: sessions of pg_stat_activity with a backend_xmin or
// backend_xid, replication slots, prepared transactions) and the jobs
// table's statistics (health_table.sql: pg_stat_user_tables). Without
// pg_read_all_stats (or pg_monitor, which includes it) other roles'
// sessions show their backend_xmin but neither state nor xact_start, so
// they are listed with no age; the report says so in FullView. Slots,
// prepared transactions and the table statistics need no grant. The row counts are the statistics system's, which
// each backend flushes when it goes idle, at most once a second, so they
// trail the table by up to a few seconds.
func (d *Driver) Health(ctx context.Context) (queue.Health, error) {
	if d.closed.Load() {
		return queue.Health{}, queue.ErrClosed
	}
	var h queue.Health
	var lastAV, lastAA, lastV, lastA pgtype.Timestamptz
	err := d.pool.QueryRow(ctx, d.stmts.healthTable).Scan(&h.At, &h.FullView,
		&h.Table.LiveRows, &h.Table.DeadRows, &lastAV, &lastAA, &lastV, &lastA)
	if err != nil {
		return queue.Health{}, failed(ctx, "health", err)
	}
	h.Table.LastAutovacuum, h.Table.LastAutoanalyze = lastAV.Time, lastAA.Time
	h.Table.LastVacuum, h.Table.LastAnalyze = lastV.Time, lastA.Time
	rows, err := d.pool.Query(ctx, d.stmts.healthHolders)
	if err != nil {
		return queue.Health{}, failed(ctx, "health", err)
	}
	defer rows.Close()
	for rows.Next() {
		var x queue.HorizonHolder
		var pid int32
		var since pgtype.Timestamptz
		var age float64
		if err := rows.Scan(&x.Kind, &pid, &x.Name, &x.State, &x.Application, &x.User,
			&since, &age, &x.XIDAge, &x.CatalogOnly); err != nil {
			return queue.Health{}, failed(ctx, "health", err)
		}
		x.PID, x.Since = int(pid), since.Time
		x.Age = time.Duration(age * float64(time.Second))
		h.Holders = append(h.Holders, x)
	}
	if err := rows.Err(); err != nil {
		return queue.Health{}, failed(ctx, "health", err)
	}
	return h, nil
}

// Check is the driver's probes for queue.Check: "horizon" and "dead rows"
// (see checkHealth).
func (d *Driver) Check(ctx context.Context) []queue.CheckResult {
	h, err := d.Health(ctx)
	if err != nil {
		return []queue.CheckResult{{Name: "horizon", Saw: err.Error(),
			Fix: "grant the account pg_monitor (or pg_read_all_stats), or see the error"}}
	}
	return checkHealth(h, d.cfg.HorizonWarn)
}

// checkHealth judges h: the horizon probe fails when a session or
// prepared transaction holding the jobs table's horizon has been open
// longer than warn, or an inactive replication slot holds it (no consumer
// will ever move it on); an active slot's age is its replica's queries,
// which the replica shows, so it is reported, not failed. The dead rows
// probe fails when queue.TableHealth.TooManyDead.
func checkHealth(h queue.Health, warn time.Duration) []queue.CheckResult {
	hz := queue.CheckResult{Name: "horizon", OK: true, Saw: "MVCC horizon " + h.HorizonSummary()}
	for _, x := range h.Holders {
		switch {
		case !x.Holds():
		case x.Kind == queue.HolderSlot && x.State == "inactive":
			hz.OK, hz.Saw = false, "an inactive "+x.String()+" holds the MVCC horizon back"
			hz.Fix = fmt.Sprintf("drop the slot if its replica is gone (SELECT pg_drop_replication_slot('%s')), or reconnect the replica; see docs/postgres-health.md", x.Name)
		case x.Kind != queue.HolderSlot && x.Age > warn && hz.OK:
			hz.OK = false
			hz.Saw = fmt.Sprintf("the MVCC horizon is held for more than %s by %s", warn, x)
			hz.Fix = "end it (pg_terminate_backend(pid), COMMIT PREPARED or ROLLBACK PREPARED), and bound other applications' " +
				"transactions with idle_in_transaction_session_timeout and statement_timeout: while it is held, vacuum keeps " +
				"every dead row of the jobs table and claims slow down; see docs/postgres-health.md"
		}
	}
	if !h.FullView {
		hz.Saw += " (other roles' sessions show no start time, so they are not judged by age: grant the account pg_monitor)"
	}
	dead := queue.CheckResult{Name: "dead rows", OK: !h.Table.TooManyDead(), Saw: "jobs table: " + h.TableSummary()}
	if !dead.OK {
		dead.Fix = fmt.Sprintf("more than max(%d, 2 × live rows) dead rows: see that autovacuum is on and that nothing holds the horizon, "+
			"then VACUUM the table; see docs/postgres-health.md", queue.DeadRowsWarn)
	}
	return []queue.CheckResult{hz, dead}
}
