package mssql

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"unicode/utf8"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	mssqldb "github.com/microsoft/go-mssqldb"
)

// enqueueChunk is the most jobs one INSERT carries: 9 parameters each, under
// SQL Server's 2,100 per request.
const enqueueChunk = 200

// Enqueue inserts jobs in one transaction — the caller's *sql.Tx, inside a
// savepoint so a failure leaves the caller's transaction usable, or its own
// — and returns their ids in order. A dedupe key or kind that is not valid
// UTF-8 gives queue.ErrInvalidJob before anything is sent (see checkKey).
func (d *Driver) Enqueue(ctx context.Context, tx any, jobs []queue.NewJob) ([]int64, error) {
	for i, j := range jobs {
		if err := cmp.Or(checkKey(j.DedupeKey), checkKind(j.Kind)); err != nil {
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
	}
	switch tx := tx.(type) {
	case nil:
		own, err := d.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, classify("enqueue", d.dedupe, err)
		}
		ids, err := d.enqueue(ctx, own, jobs)
		if err != nil {
			_ = own.Rollback()
			return nil, err
		}
		if err := own.Commit(); err != nil {
			return nil, classify("enqueue", d.dedupe, err)
		}
		return ids, nil
	case *sql.Tx:
		if _, err := tx.ExecContext(ctx, d.sql.text(sqlSavepoint)); err != nil {
			return nil, classify("enqueue", d.dedupe, err)
		}
		ids, err := d.enqueue(ctx, tx, jobs)
		if err != nil {
			_, _ = tx.ExecContext(context.WithoutCancel(ctx), d.sql.text(sqlRollbackSavepoint))
			return nil, err
		}
		return ids, nil
	}
	return nil, fmt.Errorf("%w: %T (the mssql dialect takes a *sql.Tx)", queue.ErrUnsupportedTx, tx)
}

// checkKind refuses a kind that is not valid UTF-8, for the reason
// checkKey gives: the kind column is NVARCHAR too. queue.ValidateKind
// checks the rest.
func checkKind(kind string) error {
	if !utf8.ValidString(kind) {
		return fmt.Errorf("%w: Kind %q is not valid UTF-8, which SQL Server's NVARCHAR would store altered", queue.ErrInvalidJob, kind)
	}
	return nil
}

// checkKey refuses a dedupe key that is not valid UTF-8. The key column is
// NVARCHAR: the driver sends a Go string as UTF-16, replacing each invalid
// byte with U+FFFD, so such a key would be stored altered — and two keys
// that differ only in invalid bytes would collide. Queue names are already
// plain ASCII (dialect.ValidateQueue).
func checkKey(key string) error {
	if !utf8.ValidString(key) {
		return fmt.Errorf("%w: DedupeKey %q is not valid UTF-8, which SQL Server's NVARCHAR would store altered", queue.ErrInvalidJob, key)
	}
	return nil
}

func (d *Driver) enqueue(ctx context.Context, tx *sql.Tx, jobs []queue.NewJob) ([]int64, error) {
	ids := make([]int64, 0, len(jobs))
	for start := 0; start < len(jobs); start += enqueueChunk {
		chunk := jobs[start:min(start+enqueueChunk, len(jobs))]
		stmt, err := d.variant(ctx, tx, d.sql, sqlEnqueue, sqlEnqueue, len(chunk))
		if err != nil {
			return nil, err
		}
		args := make([]any, 0, 9*len(chunk))
		for i, j := range chunk {
			runAt := sql.NullTime{Time: j.RunAt.UTC(), Valid: !j.RunAt.IsZero()}
			s, ms := splitDuration(j.Delay)
			key := sql.NullString{String: j.DedupeKey, Valid: j.DedupeKey != ""}
			args = append(args,
				named("q", i, mssqldb.VarChar(j.Queue)), named("kn", i, j.Kind), named("p", i, j.Payload), named("pr", i, j.Priority),
				named("ra", i, runAt), named("ds", i, s), named("dm", i, ms),
				named("ma", i, int32(j.MaxAttempts)), named("dk", i, key))
		}
		got, err := dialect.QueryIDs(ctx, tx, stmt, args...)
		if err != nil {
			return nil, classify("enqueue", d.dedupe, err)
		}
		if len(got) != len(chunk) {
			return nil, fmt.Errorf("dbq: enqueue: %d ids back for %d jobs", len(got), len(chunk))
		}
		ids = append(ids, got...) // ascending ids are input order
	}
	return ids, nil
}
