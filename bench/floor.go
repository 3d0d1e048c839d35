package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dbqueue/dbq/dialect"
	mysqldrv "github.com/go-sql-driver/mysql"
)

// The floor: the same database work as the library, written as the
// plainest SQL through database/sql, with no library in between.

func (e *env) param(i int) string {
	switch e.d {
	case dialect.Postgres:
		return fmt.Sprintf("$%d", i)
	case dialect.MSSQL:
		return fmt.Sprintf("@p%d", i)
	}
	return "?"
}

// floorInsert inserts n empty jobs in multi-row INSERTs of batch rows.
func (e *env) floorInsert(ctx context.Context, n, batch int) error {
	var now string
	switch e.d {
	case dialect.Postgres:
		now = "now()"
	case dialect.MySQL:
		now = "CURRENT_TIMESTAMP(6)"
	case dialect.MSSQL:
		now = "SYSUTCDATETIME()"
	}
	stmt := func(rows int) string {
		var b strings.Builder
		b.WriteString("INSERT INTO " + e.table + " (queue, payload, run_at, created_at) VALUES ")
		p := 1
		for i := range rows {
			if i > 0 {
				b.WriteByte(',')
			}
			if e.d == dialect.SQLite {
				fmt.Fprintf(&b, "(?,?,?,?)")
				continue
			}
			fmt.Fprintf(&b, "(%s,%s,%s,%s)", e.param(p), e.param(p+1), now, now)
			p += 2
		}
		return b.String()
	}
	full := stmt(batch)
	args := make([]any, 0, 4*batch)
	for done := 0; done < n; {
		k := min(batch, n-done)
		q := full
		if k != batch {
			q = stmt(k)
		}
		args = args[:0]
		micros := time.Now().UnixMicro()
		for range k {
			if e.d == dialect.SQLite {
				args = append(args, benchQueue, []byte{}, micros, micros)
			} else {
				args = append(args, benchQueue, []byte{})
			}
		}
		if _, err := e.db.ExecContext(ctx, q, args...); err != nil {
			return err
		}
		done += k
	}
	return nil
}

// floorDelete claims and completes up to limit ready jobs in one
// transaction, the way a queue with no bookkeeping would, and returns how
// many it took.
func (e *env) floorDelete(ctx context.Context, limit int) (int, error) {
	t := e.table
	const where = "queue = %s AND state = 'ready' AND run_at <= %s ORDER BY priority, run_at, id"
	var res sql.Result
	var err error
	switch e.d {
	case dialect.Postgres:
		res, err = e.db.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE id IN (SELECT id FROM %s WHERE "+where+" LIMIT %d FOR UPDATE SKIP LOCKED)",
			t, t, "$1", "now()", limit), benchQueue)
	case dialect.SQLite:
		res, err = e.db.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE id IN (SELECT id FROM %s WHERE "+where+" LIMIT %d)",
			t, t, "?", "?", limit), benchQueue, time.Now().UnixMicro())
	case dialect.MSSQL:
		res, err = e.db.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE id IN (SELECT TOP (%d) id FROM %s WITH (UPDLOCK, READPAST, ROWLOCK) WHERE "+where+")",
			t, limit, t, "@p1", "SYSUTCDATETIME()"), benchQueue)
	case dialect.MySQL:
		// MySQL cannot delete from a table it selects from in a subquery:
		// lock the ids, then delete them, in one transaction.
		sel := fmt.Sprintf("SELECT id FROM %s WHERE "+where+" LIMIT %d FOR UPDATE SKIP LOCKED", t, "?", "CURRENT_TIMESTAMP(6)", limit)
		for {
			n, err := e.mysqlDelete(ctx, sel)
			// InnoDB picks deadlock victims among concurrent SKIP LOCKED
			// deleters; any queue retries them, and so does the floor.
			var me *mysqldrv.MySQLError
			if errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205) {
				continue
			}
			return n, err
		}
	default:
		return 0, fmt.Errorf("bench: no floor for %s", e.d)
	}
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

func (e *env) mysqlDelete(ctx context.Context, sel string) (int, error) {
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, sel, benchQueue)
	if err != nil {
		return 0, err
	}
	var ids []any
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, tx.Commit()
	}
	q := "DELETE FROM " + e.table + " WHERE id IN (?" + strings.Repeat(",?", len(ids)-1) + ")"
	if _, err := tx.ExecContext(ctx, q, ids...); err != nil {
		return 0, err
	}
	return len(ids), tx.Commit()
}
