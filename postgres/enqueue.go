package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Enqueue inserts jobs with one statement (enqueue.sql: every column as an
// array parameter), so a batch is stored whole or not at all, and returns
// their IDs in input order. tx is nil (the statement commits on its own), a
// pgx.Tx (including a pgxpool transaction) or a *sql.Tx of any PostgreSQL
// driver; anything else gives queue.ErrUnsupportedTx. A dedupe-key
// collision, with a stored job or within the batch, gives
// queue.ErrDuplicate. A dedupe key PostgreSQL's text type cannot hold gives
// queue.ErrInvalidJob before anything is sent (see checkText).
func (d *Driver) Enqueue(ctx context.Context, tx any, jobs []queue.NewJob) ([]int64, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	for i, j := range jobs {
		if err := checkText(j); err != nil {
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
	}
	var (
		ids []int64
		err error
	)
	switch tx := tx.(type) {
	case nil:
		ids, err = d.enqueueOwn(ctx, jobs)
	case pgx.Tx:
		ids, err = queryIDs(ctx, tx, d.stmts.enqueue, d.enqueueArgs(jobs)...)
	case *sql.Tx:
		ids, err = d.enqueueSQL(ctx, tx, jobs)
	default:
		return nil, fmt.Errorf("%w: postgres takes a pgx.Tx or *sql.Tx, not %T", queue.ErrUnsupportedTx, tx)
	}
	if err != nil {
		return nil, interpret("enqueue", err)
	}
	if len(ids) != len(jobs) {
		return nil, fmt.Errorf("dbq: postgres: enqueue stored %d of %d jobs", len(ids), len(jobs))
	}
	// Rows are inserted in input order (enqueue.sql), so their identity
	// values ascend in that order.
	slices.Sort(ids)
	return ids, nil
}

// checkText refuses a job whose dedupe key or kind PostgreSQL's text type
// cannot hold: one with a NUL byte or invalid UTF-8, which the server would
// refuse with SQLSTATE 22021 — aborting the caller's transaction, when the
// jobs are enqueued in one. Other dialects store such keys (MySQL's column
// is binary), so the check is this dialect's, not queue's. Queue names are
// already plain ASCII, and last_error goes through errorText.
func checkText(j queue.NewJob) error {
	if err := validText("DedupeKey", j.DedupeKey); err != nil {
		return err
	}
	return validText("Kind", j.Kind)
}

// validText refuses a value of field that PostgreSQL text cannot hold.
func validText(field, s string) error {
	switch {
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: %s %q has a NUL byte, which PostgreSQL text cannot hold", queue.ErrInvalidJob, field, s)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s %q is not valid UTF-8, which PostgreSQL text requires", queue.ErrInvalidJob, field, s)
	}
	return nil
}

// enqueueOwn runs the insert on a connection of the pool, under guard: a
// cancelled ctx stops it with a cancel request, so the caller learns for
// sure whether the jobs were stored.
func (d *Driver) enqueueOwn(ctx context.Context, jobs []queue.NewJob) ([]int64, error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	return guardedIDs(ctx, conn.Conn(), d.stmts.enqueue, d.enqueueArgs(jobs)...)
}

// enqueueArgs returns enqueue.sql's parameters: typed arrays, sent in
// binary, and the notification channel.
func (d *Driver) enqueueArgs(jobs []queue.NewJob) []any {
	var (
		queues      = make([]string, len(jobs))
		payloads    = make([][]byte, len(jobs))
		priorities  = make([]int16, len(jobs))
		runAts      = make([]pgtype.Timestamptz, len(jobs))
		delays      = make([]int64, len(jobs))
		maxAttempts = make([]int32, len(jobs))
		dedupeKeys  = make([]pgtype.Text, len(jobs))
		kinds       = make([]string, len(jobs))
	)
	for i, j := range jobs {
		queues[i] = j.Queue
		payloads[i] = j.Payload
		if payloads[i] == nil {
			payloads[i] = []byte{}
		}
		priorities[i] = j.Priority
		runAts[i] = pgtype.Timestamptz{Time: j.RunAt, Valid: !j.RunAt.IsZero()}
		delays[i] = j.Delay.Microseconds()
		maxAttempts[i] = int32(j.MaxAttempts)
		dedupeKeys[i] = pgtype.Text{String: j.DedupeKey, Valid: j.DedupeKey != ""}
		kinds[i] = j.Kind
	}
	return []any{queues, payloads, priorities, runAts, delays, maxAttempts, dedupeKeys, kinds, d.channelArg()}
}

// enqueueSQL runs the insert in a database/sql transaction. The arrays
// travel as text in PostgreSQL's array syntax, which every driver can send
// (pgx's stdlib, lib/pq) and the statement's casts parse.
func (d *Driver) enqueueSQL(ctx context.Context, tx *sql.Tx, jobs []queue.NewJob) ([]int64, error) {
	args := d.enqueueArgs(jobs)
	oids := []uint32{
		pgtype.TextArrayOID, pgtype.ByteaArrayOID, pgtype.Int2ArrayOID, pgtype.TimestamptzArrayOID,
		pgtype.Int8ArrayOID, pgtype.Int4ArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID,
	}
	m := pgtype.NewMap()
	for i, a := range args[:len(oids)] {
		b, err := m.Encode(oids[i], pgtype.TextFormatCode, a, nil)
		if err != nil {
			return nil, fmt.Errorf("dbq: postgres: encode enqueue parameter %d: %w", i+1, err)
		}
		args[i] = string(b)
	}
	rows, err := tx.QueryContext(ctx, d.stmts.enqueue, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := make([]int64, 0, len(jobs))
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
