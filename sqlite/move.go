package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/dbqueue/dbq/internal/movekit"
	"github.com/dbqueue/dbq/queue"
)

var _ queue.Mover = (*Driver)(nil)

// The statements of package move are in sql/move/ (d.stmts.move); their
// ?1 is a JSON array of queue names, '[]' for every queue.

func (d *Driver) moveArgs(f queue.ExportFilter) []any {
	qs := f.Queues
	if qs == nil {
		qs = []string{}
	}
	b, _ := json.Marshal(qs)
	return []any{string(b), f.Ready, f.Scheduled, f.Dead}
}

// Identity implements queue.Mover: sqlite://file/table.
func (d *Driver) Identity(ctx context.Context) (string, error) {
	if d.closed.Load() {
		return "", queue.ErrClosed
	}
	var file string
	err := d.db.QueryRowContext(ctx, d.stmts.move.identity).Scan(&file)
	if err != nil {
		return "", interpret(err)
	}
	if file == "" {
		file = fmt.Sprintf("memory@%p", d.db)
	}
	return "sqlite://" + file + "/" + d.names.Jobs(), nil
}

// Survey implements queue.Mover.
func (d *Driver) Survey(ctx context.Context, f queue.ExportFilter) (queue.Survey, error) {
	var s queue.Survey
	if d.closed.Load() {
		return s, queue.ErrClosed
	}
	err := retry(ctx, func() error {
		return interpret(d.db.QueryRowContext(ctx, d.stmts.move.survey, d.moveArgs(f)...).
			Scan(&s.MaxPayload, &s.MaxKeyBytes, &s.MaxKeyChars))
	})
	return s, err
}

// Limits implements queue.Mover: SQLite's default SQLITE_MAX_LENGTH, one
// billion bytes, bounds a value; TEXT keys have no limit of their own.
func (d *Driver) Limits(context.Context) (queue.MoveLimits, error) {
	return queue.MoveLimits{Payload: 1_000_000_000}, nil
}

// Export implements queue.Mover. SQLite has one writer: the batch holds the
// write lock (and the driver's writer slot) until it ends, so claims of
// every process wait for it rather than skip its jobs. Keep batches small.
func (d *Driver) Export(ctx context.Context, f queue.ExportFilter) (queue.ExportBatch, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	if !d.noGate {
		select {
		case d.gate <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	b := &exportBatch{d: d}
	if err := retry(ctx, func() error { return b.take(ctx, f) }); err != nil {
		b.release()
		return nil, err
	}
	return b, nil
}

type exportBatch struct {
	d      *Driver
	tx     *sql.Tx
	jobs   []*queue.Job
	cursor int64
	once   sync.Once
}

// take begins the write transaction and reads the batch.
func (b *exportBatch) take(ctx context.Context, f queue.ExportFilter) error {
	d := b.d
	tx, err := d.begin(ctx)
	if err != nil {
		return err
	}
	fail := func(err error) error { _ = tx.Rollback(); return interpret(err) }
	if _, err := tx.ExecContext(ctx, d.stmts.move.take); err != nil {
		return fail(err)
	}
	rows, err := tx.QueryContext(ctx, d.stmts.move.export, append(d.moveArgs(f), f.AfterID, f.Limit)...)
	if err != nil {
		return fail(err)
	}
	jobs, err := scanMoved(rows)
	if err != nil {
		return fail(err)
	}
	b.tx, b.jobs = tx, jobs
	if len(jobs) > 0 {
		b.cursor = jobs[len(jobs)-1].ID
	}
	return nil
}

func (b *exportBatch) Jobs() []*queue.Job { return b.jobs }
func (b *exportBatch) Cursor() int64      { return b.cursor }

func (b *exportBatch) Commit(ctx context.Context, ids []int64) error {
	err := queue.ErrClosed
	b.once.Do(func() {
		defer b.releaseGate()
		if len(ids) > 0 {
			if _, err = b.tx.ExecContext(ctx, b.d.stmts.move.delete, idsJSON(ids)); err != nil {
				_ = b.tx.Rollback()
				err = interpret(err)
				return
			}
		}
		err = interpret(b.tx.Commit())
	})
	return err
}

func (b *exportBatch) Rollback() error {
	b.release()
	return nil
}

func (b *exportBatch) release() {
	b.once.Do(func() {
		if b.tx != nil {
			_ = b.tx.Rollback()
		}
		b.releaseGate()
	})
}

func (b *exportBatch) releaseGate() {
	if !b.d.noGate {
		<-b.d.gate
	}
}

// scanMoved reads rows of the move statements' columns and closes them.
func scanMoved(rows *sql.Rows) ([]*queue.Job, error) {
	defer rows.Close()
	var out []*queue.Job
	for rows.Next() {
		var (
			j                        queue.Job
			priority, runAt, created int64
			attempt, maxAttempts     int64
			state                    string
			lastErr, dedupe          sql.NullString
		)
		if err := rows.Scan(&j.ID, &j.Queue, &j.Kind, &j.Payload, &priority, &runAt, &attempt, &maxAttempts, &state,
			&lastErr, &dedupe, &created); err != nil {
			return nil, err
		}
		if j.Payload == nil {
			j.Payload = []byte{}
		}
		j.Priority = int16(priority)
		j.RunAt, j.CreatedAt = fromMicros(runAt), fromMicros(created)
		j.Attempt, j.MaxAttempts = int(attempt), int(maxAttempts)
		j.State = queue.State(state)
		j.LastError, j.DedupeKey = lastErr.String, dedupe.String
		out = append(out, &j)
	}
	return out, rows.Err()
}

// Import implements queue.Mover: one write transaction, a prepared insert
// per job (SQLite runs in process, so a statement costs microseconds).
func (d *Driver) Import(ctx context.Context, jobs []*queue.Job) ([]queue.Imported, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	if err := movekit.Importable(jobs); err != nil {
		return nil, err
	}
	var out []queue.Imported
	err := d.write(ctx, true, func(ctx context.Context, r runner) error {
		ins, err := r.tx.PrepareContext(ctx, d.stmts.move.insert)
		if err != nil {
			return interpret(err)
		}
		defer ins.Close()
		var added []int64
		for _, j := range jobs {
			var lastErr any
			if j.LastError != "" {
				lastErr = j.LastError
			}
			var id int64
			err := ins.QueryRowContext(ctx, j.Queue, j.Payload, j.Priority, j.RunAt.UnixMicro(), j.Attempt,
				j.MaxAttempts, string(j.State), lastErr, j.DedupeKey, j.CreatedAt.UnixMicro(), j.Kind).Scan(&id)
			switch {
			case err == sql.ErrNoRows:
			case err != nil:
				return interpret(err)
			default:
				added = append(added, id)
			}
		}
		keys := make([]queue.JobKey, len(jobs))
		for i, j := range jobs {
			keys[i] = queue.JobKey{Queue: j.Queue, DedupeKey: j.DedupeKey}
		}
		stored, err := d.storedByKey(ctx, r.tx, keys)
		if err != nil {
			return err
		}
		out, err = movekit.Match("sqlite", jobs, stored, movekit.IDSet(added))
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Stored implements queue.Mover: sql/move/stored.sql once per key, outside a
// transaction.
func (d *Driver) Stored(ctx context.Context, keys []queue.JobKey) ([]*queue.Job, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	var out []*queue.Job
	err := retry(ctx, func() (err error) {
		out, err = d.storedByKey(ctx, d.db, keys)
		return err
	})
	return out, err
}

// storedByKey runs sql/move/stored.sql once per key, in a transaction or not.
func (d *Driver) storedByKey(ctx context.Context, db interface {
	PrepareContext(context.Context, string) (*sql.Stmt, error)
}, keys []queue.JobKey) ([]*queue.Job, error) {
	sel, err := db.PrepareContext(ctx, d.stmts.move.stored)
	if err != nil {
		return nil, interpret(err)
	}
	defer sel.Close()
	out := make([]*queue.Job, 0, len(keys))
	for _, k := range keys {
		rows, err := sel.QueryContext(ctx, k.Queue, k.DedupeKey)
		if err != nil {
			return nil, interpret(err)
		}
		got, err := scanMoved(rows)
		if err != nil {
			return nil, interpret(err)
		}
		out = append(out, got...)
	}
	return out, nil
}
