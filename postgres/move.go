package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dbqueue/dbq/internal/movekit"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

var _ queue.Mover = (*Driver)(nil)

// Identity implements queue.Mover: postgres://<system identifier>/<database>/<table>,
// the same over a socket or TCP and from any address of the server. Where
// the role may not call pg_control_system(), the server's address and port
// stand in for the system identifier.
func (d *Driver) Identity(ctx context.Context) (string, error) {
	if d.closed.Load() {
		return "", queue.ErrClosed
	}
	var server, db string
	err := d.pool.QueryRow(ctx, d.move.identity).Scan(&server, &db)
	if isCode(err, codeInsufficientPrivilege) {
		err = d.pool.QueryRow(ctx, d.move.address).Scan(&server, &db)
	}
	if err != nil {
		return "", interpret("identity", err)
	}
	return fmt.Sprintf("postgres://%s/%s/%s", server, db, d.stmts.table), nil
}

// Survey implements queue.Mover.
func (d *Driver) Survey(ctx context.Context, f queue.ExportFilter) (queue.Survey, error) {
	var s queue.Survey
	if d.closed.Load() {
		return s, queue.ErrClosed
	}
	err := d.pool.QueryRow(ctx, d.move.survey, queuesArg(f.Queues), f.Ready, f.Scheduled, f.Dead).
		Scan(&s.MaxPayload, &s.MaxKeyBytes, &s.MaxKeyChars)
	if err != nil {
		return s, interpret("survey", err)
	}
	return s, nil
}

// Limits implements queue.Mover: bytea holds up to 1 GiB, dedupe_key is
// varchar(200) text.
func (d *Driver) Limits(context.Context) (queue.MoveLimits, error) {
	return queue.MoveLimits{Payload: 1<<30 - 1, KeyChars: 200, TextKeys: true}, nil
}

func queuesArg(qs []string) any {
	if len(qs) == 0 {
		return nil
	}
	return qs
}

// Export implements queue.Mover. The batch holds one pool connection and
// its transaction until it ends.
func (d *Driver) Export(ctx context.Context, f queue.ExportFilter) (queue.ExportBatch, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, interpret("export", err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		conn.Release()
		return nil, interpret("export", err)
	}
	b := &exportBatch{d: d, conn: conn, tx: tx}
	rows, err := tx.Query(ctx, d.move.export, f.AfterID, queuesArg(f.Queues), f.Ready, f.Scheduled, f.Dead, f.Limit)
	if err != nil {
		b.end(ctx)
		return nil, failed(ctx, "export", err)
	}
	for rows.Next() {
		var (
			id, attempt, maxAttempts, cursor pgtype.Int8
			j                                queue.Job
			priority                         pgtype.Int2
			runAt, createdAt                 pgtype.Timestamptz
			state, lastErr, key, qname, kind pgtype.Text
		)
		if err := rows.Scan(&id, &qname, &j.Payload, &priority, &runAt, &attempt, &maxAttempts, &state,
			&lastErr, &key, &createdAt, &kind, &cursor); err != nil {
			rows.Close()
			b.end(ctx)
			return nil, failed(ctx, "export", err)
		}
		b.cursor = cursor.Int64
		if !id.Valid {
			continue // the one row of an empty batch
		}
		j.ID, j.Queue, j.Kind, j.Priority, j.RunAt = id.Int64, qname.String, kind.String, priority.Int16, runAt.Time
		j.Attempt, j.MaxAttempts = int(attempt.Int64), int(maxAttempts.Int64)
		j.State, j.LastError, j.DedupeKey, j.CreatedAt = queue.State(state.String), lastErr.String, key.String, createdAt.Time
		if j.Payload == nil {
			j.Payload = []byte{}
		}
		b.jobs = append(b.jobs, &j)
	}
	if err := rows.Err(); err != nil {
		b.end(ctx)
		return nil, failed(ctx, "export", err)
	}
	return b, nil
}

type exportBatch struct {
	d      *Driver
	conn   *pgxpool.Conn
	tx     pgx.Tx
	jobs   []*queue.Job
	cursor int64

	once sync.Once
}

func (b *exportBatch) Jobs() []*queue.Job { return b.jobs }
func (b *exportBatch) Cursor() int64      { return b.cursor }

func (b *exportBatch) Commit(ctx context.Context, ids []int64) error {
	err := queue.ErrClosed
	b.once.Do(func() {
		defer b.conn.Release()
		if len(ids) > 0 {
			if _, err = b.tx.Exec(ctx, b.d.move.delete, ids); err != nil {
				_ = b.tx.Rollback(context.WithoutCancel(ctx))
				err = failed(ctx, "export commit", err)
				return
			}
		}
		if err = b.tx.Commit(ctx); err != nil {
			err = failed(ctx, "export commit", err)
		}
	})
	return err
}

// Rollback ends the batch within cleanupTimeout: queue.ExportBatch's
// Rollback takes no context.
func (b *exportBatch) Rollback() error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	b.end(ctx)
	return nil
}

// end rolls the transaction back and gives the connection back, once,
// within cleanupTimeout whatever ctx says.
func (b *exportBatch) end(ctx context.Context) {
	b.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = b.tx.Rollback(ctx)
		b.conn.Release()
	})
}

// Import implements queue.Mover, in one transaction. PostgreSQL text holds
// no NUL byte nor invalid UTF-8, so a last_error from another database is
// made valid (NULs dropped, bad bytes replaced); a dedupe key or a kind
// that is not valid text fails with queue.ErrInvalidJob.
func (d *Driver) Import(ctx context.Context, jobs []*queue.Job) ([]queue.Imported, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	n := len(jobs)
	if n == 0 {
		return nil, nil
	}
	var (
		queues, states, lastErrs, keys = make([]string, n), make([]string, n), make([]*string, n), make([]string, n)
		kinds                          = make([]string, n)
		payloads                       = make([][]byte, n)
		priorities                     = make([]int16, n)
		runAts, createdAts             = make([]time.Time, n), make([]time.Time, n)
		attempts, maxAttempts          = make([]int32, n), make([]int32, n)
	)
	if err := movekit.Importable(jobs); err != nil {
		return nil, err
	}
	for i, j := range jobs {
		if err := validText("Kind", j.Kind); err != nil {
			return nil, fmt.Errorf("import of job %d: %w", j.ID, err)
		}
		queues[i], kinds[i], states[i], keys[i] = j.Queue, j.Kind, string(j.State), j.DedupeKey
		payloads[i], priorities[i], runAts[i] = j.Payload, j.Priority, j.RunAt
		if payloads[i] == nil {
			payloads[i] = []byte{}
		}
		createdAts[i] = j.CreatedAt
		if createdAts[i].IsZero() {
			createdAts[i] = time.Now()
		}
		attempts[i], maxAttempts[i] = int32(j.Attempt), int32(j.MaxAttempts)
		if j.LastError != "" {
			s := movekit.ValidText(j.LastError)
			lastErrs[i] = &s
		}
	}
	var out []queue.Imported
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		added, err := queryIDs(ctx, tx, d.move.insert, queues, payloads, priorities, runAts, attempts,
			maxAttempts, states, lastErrs, keys, createdAts, kinds)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, d.move.stored, queues, keys)
		if err != nil {
			return err
		}
		stored, err := collectStored(rows)
		if err != nil {
			return err
		}
		out, err = movekit.Match("postgres", jobs, stored, movekit.IDSet(added))
		if err != nil {
			return err
		}
		if ch := d.channelArg(); ch != nil && len(added) > 0 {
			if _, err := tx.Exec(ctx, d.move.notify, ch, queues); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, failed(ctx, "import", err)
	}
	return out, nil
}

// collectStored reads rows of stored.sql.
func collectStored(rows pgx.Rows) ([]*queue.Job, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*queue.Job, error) {
		var (
			j        queue.Job
			lastErr  pgtype.Text
			attempt  int32
			maxTries int32
			state    string
		)
		err := r.Scan(&j.ID, &j.Queue, &j.Payload, &j.Priority, &j.RunAt, &attempt, &maxTries, &state,
			&lastErr, &j.DedupeKey, &j.CreatedAt, &j.Kind)
		j.Attempt, j.MaxAttempts, j.State, j.LastError = int(attempt), int(maxTries), queue.State(state), lastErr.String
		if j.Payload == nil {
			j.Payload = []byte{}
		}
		return &j, err
	})
}

// Stored implements queue.Mover with stored.sql, outside a transaction.
// A job an advisory claimer holds reads as it is stored: ready.
func (d *Driver) Stored(ctx context.Context, keys []queue.JobKey) ([]*queue.Job, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	if len(keys) == 0 {
		return nil, nil
	}
	queues, dedupe := make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		queues[i], dedupe[i] = k.Queue, k.DedupeKey
	}
	rows, err := d.pool.Query(ctx, d.move.stored, queues, dedupe)
	if err != nil {
		return nil, interpret("stored", err)
	}
	out, err := collectStored(rows)
	if err != nil {
		return nil, interpret("stored", err)
	}
	return out, nil
}
