package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/movekit"
	"github.com/dbqueue/dbq/queue"
)

var _ queue.Mover = (*Driver)(nil)

// moveArgs returns the parameters of the filter of f in survey.sql and
// export.sql: its queues, then the ready, scheduled and dead flags.
func moveArgs(f queue.ExportFilter) []any {
	args := make([]any, 0, len(f.Queues)+3)
	for _, q := range f.Queues {
		args = append(args, q)
	}
	return append(args, f.Ready, f.Scheduled, f.Dead)
}

// Identity implements queue.Mover: mysql://<server>/<database>/<table>,
// the same over a socket or TCP. The server is MySQL's @@server_uuid;
// MariaDB has none, so there it is the host name, port and data directory.
func (d *Driver) Identity(ctx context.Context) (string, error) {
	if d.closed.Load() {
		return "", queue.ErrClosed
	}
	var server, db sql.NullString
	err := d.db.QueryRowContext(ctx, d.stmts.get(sqlMoveIdentity, 0)).Scan(&server, &db)
	if err != nil {
		err = d.db.QueryRowContext(ctx, d.stmts.get(sqlMoveIdentityHost, 0)).Scan(&server, &db)
	}
	if err != nil {
		return "", d.classify("identity", err)
	}
	return fmt.Sprintf("mysql://%s/%s/%s", server.String, db.String, d.stmts.jobsTable), nil
}

// Survey implements queue.Mover.
func (d *Driver) Survey(ctx context.Context, f queue.ExportFilter) (queue.Survey, error) {
	var s queue.Survey
	if d.closed.Load() {
		return s, queue.ErrClosed
	}
	q := d.stmts.get(sqlMoveSurvey, len(f.Queues))
	if err := d.db.QueryRowContext(ctx, q, moveArgs(f)...).Scan(&s.MaxPayload, &s.MaxKeyBytes, &s.MaxKeyChars); err != nil {
		return s, d.classify("survey", err)
	}
	return s, nil
}

// Limits implements queue.Mover: a payload travels in one packet, so
// max_allowed_packet bounds it (less room for the rest of the row);
// dedupe_key is VARBINARY(200).
func (d *Driver) Limits(ctx context.Context) (queue.MoveLimits, error) {
	var packet int64
	if err := d.db.QueryRowContext(ctx, d.stmts.get(sqlMoveLimits, 0)).Scan(&packet); err != nil {
		return queue.MoveLimits{}, d.classify("limits", err)
	}
	return queue.MoveLimits{Payload: packet - packetSlack, KeyBytes: 200}, nil
}

// packetSlack is the room a row's other columns and the statement take in
// a packet besides the payload.
const packetSlack = 16 << 10

// Export implements queue.Mover: candidates in id order without locks,
// then those still unheld locked FOR UPDATE SKIP LOCKED (a claim that
// holds a row's lock or has made it 'claimed' keeps it) until the batch's
// transaction ends.
func (d *Driver) Export(ctx context.Context, f queue.ExportFilter) (queue.ExportBatch, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	tx, err := beginRC(ctx, d.db)
	if err != nil {
		return nil, d.classify("export", err)
	}
	b := &exportBatch{d: d, tx: tx}
	if err := b.take(ctx, f); err != nil {
		_ = tx.Rollback()
		return nil, d.classify("export", err)
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

func (b *exportBatch) take(ctx context.Context, f queue.ExportFilter) error {
	rows, err := b.tx.QueryContext(ctx, b.d.stmts.get(sqlMoveExport, len(f.Queues)),
		append(append([]any{f.AfterID}, moveArgs(f)...), f.Limit)...)
	if err != nil {
		return err
	}
	var ids []any
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
		b.cursor = id
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(ids) == 0 {
		return err
	}
	rows, err = b.tx.QueryContext(ctx, b.d.stmts.get(sqlMoveExportLock, len(ids)), ids...)
	if err != nil {
		return err
	}
	b.jobs, err = scanMoved(rows)
	return err
}

func (b *exportBatch) Jobs() []*queue.Job { return b.jobs }
func (b *exportBatch) Cursor() int64      { return b.cursor }

func (b *exportBatch) Commit(ctx context.Context, ids []int64) error {
	err := queue.ErrClosed
	b.once.Do(func() {
		if len(ids) > 0 {
			args := anys(slices.Compact(slices.Sorted(slices.Values(ids))))
			// Only jobs still unheld: the DELETE, not the lock, decides. On a
			// server whose SKIP LOCKED locks nothing (TiDB) a claimer may have
			// taken some since the batch read them; they stay its, and the
			// batch fails rather than report them moved.
			res, derr := b.tx.ExecContext(ctx, b.d.stmts.get(sqlMoveDelete, len(args)), args...)
			var n int64
			if derr == nil {
				n, derr = res.RowsAffected()
			}
			if derr != nil {
				_ = b.tx.Rollback()
				err = b.d.classify("export commit", derr)
				return
			}
			if want := int64(len(args)); n != want {
				_ = b.tx.Rollback()
				err = fmt.Errorf("dbq: mysql export commit: %d of the batch's %d jobs were taken meanwhile (the server's SKIP LOCKED did not lock them); rolled back",
					want-n, want)
				return
			}
		}
		err = b.d.classify("export commit", b.tx.Commit())
	})
	return err
}

func (b *exportBatch) Rollback() error {
	b.once.Do(func() { _ = b.tx.Rollback() })
	return nil
}

// scanMoved reads rows of export_lock.sql or stored.sql and closes them.
func scanMoved(rows *sql.Rows) ([]*queue.Job, error) {
	defer rows.Close()
	var out []*queue.Job
	for rows.Next() {
		var (
			j                queue.Job
			runAt, createdAt utcTime
			state            string
			lastErr          sql.NullString
			kind, key        []byte
		)
		if err := rows.Scan(&j.ID, &j.Queue, &kind, &j.Payload, &j.Priority, &runAt, &j.Attempt, &j.MaxAttempts, &state,
			&lastErr, &key, &createdAt); err != nil {
			return nil, err
		}
		if j.Payload == nil {
			j.Payload = []byte{}
		}
		j.RunAt, j.CreatedAt = runAt.T, createdAt.T
		j.Kind, j.State, j.LastError, j.DedupeKey = string(kind), queue.State(state), lastErr.String, string(key)
		out = append(out, &j)
	}
	return out, rows.Err()
}

// Import implements queue.Mover in one transaction: the jobs already
// stored are found by (queue, dedupe_key) first, the others inserted in
// multi-row statements that fit a packet, then all read back.
func (d *Driver) Import(ctx context.Context, jobs []*queue.Job) ([]queue.Imported, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	if err := movekit.Importable(jobs); err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	limits, err := d.Limits(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := beginRC(ctx, d.db)
	if err != nil {
		return nil, d.classify("import", err)
	}
	defer func() { _ = tx.Rollback() }()
	before, err := d.storedByKey(ctx, tx, jobKeys(jobs))
	if err != nil {
		return nil, d.classify("import", err)
	}
	existed := make(map[[2]string]bool, len(before))
	old := make([]int64, 0, len(before))
	for _, s := range before {
		existed[[2]string{s.Queue, s.DedupeKey}] = true
		old = append(old, s.ID)
	}
	var rows []*queue.Job
	size := int64(0)
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		err := d.insertMoved(ctx, tx, rows)
		rows, size = rows[:0], 0
		return err
	}
	for _, j := range jobs {
		if existed[[2]string{j.Queue, j.DedupeKey}] {
			continue
		}
		n := int64(len(j.Payload)+len(j.LastError)+len(j.Kind)) + 256
		if len(rows) == importChunk || (len(rows) > 0 && size+n > limits.Payload/2) {
			if err := flush(); err != nil {
				return nil, d.classify("import", err)
			}
		}
		rows, size = append(rows, j), size+n
	}
	if err := flush(); err != nil {
		return nil, d.classify("import", err)
	}
	stored, err := d.storedByKey(ctx, tx, jobKeys(jobs))
	if err != nil {
		return nil, d.classify("import", err)
	}
	oldSet := movekit.IDSet(old)
	out, err := movekit.Match("mysql", jobs, stored, func(id int64) bool { return !oldSet(id) })
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, d.classify("import", err)
	}
	return out, nil
}

// importChunk is the most rows of one import INSERT.
const importChunk = 500

func (d *Driver) insertMoved(ctx context.Context, tx *sql.Tx, jobs []*queue.Job) error {
	args := make([]any, 0, len(jobs)*11)
	for _, j := range jobs {
		var lastErr any
		if j.LastError != "" {
			lastErr = movekit.ValidText(j.LastError)
		}
		created := j.CreatedAt
		if created.IsZero() {
			created = time.Now()
		}
		payload := j.Payload
		if payload == nil {
			payload = []byte{}
		}
		args = append(args, j.Queue, []byte(j.Kind), payload, j.Priority, formatTime(j.RunAt), j.Attempt, j.MaxAttempts,
			string(j.State), lastErr, []byte(j.DedupeKey), formatTime(created))
	}
	_, err := tx.ExecContext(ctx, d.stmts.get(sqlMoveInsert, len(jobs)), args...)
	return err
}

// Stored implements queue.Mover with storedByKey, outside a transaction.
func (d *Driver) Stored(ctx context.Context, keys []queue.JobKey) ([]*queue.Job, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	out, err := d.storedByKey(ctx, d.db, keys)
	if err != nil {
		return nil, d.classify("stored", err)
	}
	return out, nil
}

// jobKeys are the (queue, dedupe key) of jobs.
func jobKeys(jobs []*queue.Job) []queue.JobKey {
	keys := make([]queue.JobKey, len(jobs))
	for i, j := range jobs {
		keys[i] = queue.JobKey{Queue: j.Queue, DedupeKey: j.DedupeKey}
	}
	return keys
}

// storedByKey reads the stored jobs with keys, one statement per queue so
// that each is a range of the dedupe index.
func (d *Driver) storedByKey(ctx context.Context, db dialect.Querier, keys []queue.JobKey) ([]*queue.Job, error) {
	byQueue := map[string][]any{}
	var order []string
	for _, k := range keys {
		if _, ok := byQueue[k.Queue]; !ok {
			order = append(order, k.Queue)
		}
		byQueue[k.Queue] = append(byQueue[k.Queue], []byte(k.DedupeKey))
	}
	var out []*queue.Job
	for _, q := range order {
		keys := byQueue[q]
		rows, err := db.QueryContext(ctx, d.stmts.get(sqlMoveStored, len(keys)), append([]any{q}, keys...)...)
		if err != nil {
			return nil, err
		}
		got, err := scanMoved(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}
