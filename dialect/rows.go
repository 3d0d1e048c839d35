package dialect

import (
	"context"
	"database/sql"
)

// Querier is what database/sql's *DB, *Conn and *Tx share for queries.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// QueryIDs runs a statement whose result is one column of ids. It reads
// every row and checks rows.Err and the error of Close: a statement may send
// rows and then fail (SQL Server's OUTPUT does), and only those report it.
func QueryIDs(ctx context.Context, q Querier, query string, args ...any) ([]int64, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return ids, rows.Close()
}
