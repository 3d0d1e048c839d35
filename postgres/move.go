package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dbqueue/dbq/internal/movekit"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

var _ queue.Mover = (*Driver)(nil)

// The statements of package move. {{jobs}} is the only text spliced in.
const (
	// moveIdentity: the cluster's system identifier (the same however the
	// server is reached), and the database.
	moveIdentitySQL = `SELECT system_identifier::text, current_database() FROM pg_control_system()`

	// moveAddressSQL: where pg_control_system() is not granted, the
	// server's address (or "local" over a socket) and port instead.
	moveAddressSQL = `SELECT coalesce(host(inet_server_addr()), 'local') || ':' || current_setting('port'), current_database()`

	// moveSurvey: the largest payload and key among the selected jobs.
	moveSurveySQL = `SELECT coalesce(max(octet_length(payload)), 0), coalesce(max(octet_length(dedupe_key)), 0),
       coalesce(max(char_length(dedupe_key)), 0)
FROM {{jobs}}
WHERE ($1::text[] IS NULL OR queue = ANY($1::text[]))
  AND ((state = 'ready' AND run_at <= now() AND $2::bool)
    OR (state = 'ready' AND run_at > now() AND $3::bool)
    OR (state = 'dead' AND $4::bool))`

	// moveExport: candidates in id order without locks, then each locked
	// on its own, by primary key in a LATERAL subquery (so that no plan
	// can take locks on rows outside the batch): the row by FOR UPDATE
	// SKIP LOCKED (lease claimers skip it, and a row a claim or a retry
	// changed meanwhile fails the recheck of the filter), the job's
	// advisory key by pg_try_advisory_xact_lock (advisory claimers skip
	// it, and a job an advisory claimer holds is passed over). Both locks
	// last until the batch's transaction ends. The last column is the
	// largest candidate id, the next batch's cursor.
	moveExportSQL = `WITH c AS MATERIALIZED (
    SELECT id FROM {{jobs}}
    WHERE id > $1
      AND ($2::text[] IS NULL OR queue = ANY($2::text[]))
      AND ((state = 'ready' AND run_at <= now() AND $3::bool)
        OR (state = 'ready' AND run_at > now() AND $4::bool)
        OR (state = 'dead' AND $5::bool))
    ORDER BY id
    LIMIT $6
), locked AS (
    SELECT l.*
    FROM c CROSS JOIN LATERAL (
        SELECT j.id, j.queue, j.payload, j.priority, j.run_at, j.attempt, j.max_attempts, j.state,
               j.last_error, j.dedupe_key, j.created_at
        FROM {{jobs}} j
        WHERE j.id = c.id
          AND ((j.state = 'ready' AND j.run_at <= now() AND $3::bool)
            OR (j.state = 'ready' AND j.run_at > now() AND $4::bool)
            OR (j.state = 'dead' AND $5::bool))
          AND pg_try_advisory_xact_lock(j.tableoid::int4, j.id::bit(32)::int4)
        FOR UPDATE OF j SKIP LOCKED
    ) AS l
)
SELECT l.*, (SELECT max(id) FROM c) FROM (SELECT 1) AS one LEFT JOIN locked l ON true ORDER BY l.id`

	moveDeleteSQL = `DELETE FROM {{jobs}} WHERE id = ANY($1::int8[])`

	// moveImport stores jobs as they were; a (queue, dedupe_key) already
	// stored is skipped. moveStored then reads every job of the batch by
	// its key: the new ones and those that were there.
	moveImportSQL = `INSERT INTO {{jobs}}
    (queue, payload, priority, run_at, attempt, max_attempts, state, last_error, dedupe_key, created_at)
SELECT u.queue, u.payload, u.priority, u.run_at, u.attempt, u.max_attempts, u.state, u.last_error, u.dedupe_key, u.created_at
FROM unnest($1::text[], $2::bytea[], $3::int2[], $4::timestamptz[], $5::int4[], $6::int4[], $7::text[], $8::text[],
            $9::text[], $10::timestamptz[])
     WITH ORDINALITY AS u(queue, payload, priority, run_at, attempt, max_attempts, state, last_error, dedupe_key, created_at, ord)
ORDER BY u.ord
ON CONFLICT (queue, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
RETURNING id`

	moveStoredSQL = `SELECT j.id, j.queue, j.payload, j.priority, j.run_at, j.attempt, j.max_attempts, j.state,
       j.last_error, j.dedupe_key, j.created_at
FROM {{jobs}} j JOIN unnest($1::text[], $2::text[]) AS k(queue, dedupe_key)
  ON j.queue = k.queue AND j.dedupe_key = k.dedupe_key`

	moveNotifySQL = `SELECT pg_notify($1::text, q) FROM (SELECT DISTINCT unnest($2::text[]) AS q) AS x`
)

func (d *Driver) moveSQL(s string) string { return strings.ReplaceAll(s, tableMarker, d.stmts.table) }

// Identity implements queue.Mover: postgres://<system identifier>/<database>/<table>,
// the same over a socket or TCP and from any address of the server. Where
// the role may not call pg_control_system(), the server's address and port
// stand in for the system identifier.
func (d *Driver) Identity(ctx context.Context) (string, error) {
	if d.closed.Load() {
		return "", queue.ErrClosed
	}
	var server, db string
	err := d.pool.QueryRow(ctx, moveIdentitySQL).Scan(&server, &db)
	if isCode(err, codeInsufficientPrivilege) {
		err = d.pool.QueryRow(ctx, moveAddressSQL).Scan(&server, &db)
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
	err := d.pool.QueryRow(ctx, d.moveSQL(moveSurveySQL), queuesArg(f.Queues), f.Ready, f.Scheduled, f.Dead).
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
	rows, err := tx.Query(ctx, d.moveSQL(moveExportSQL), f.AfterID, queuesArg(f.Queues), f.Ready, f.Scheduled, f.Dead, f.Limit)
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
			state, lastErr, key, qname       pgtype.Text
		)
		if err := rows.Scan(&id, &qname, &j.Payload, &priority, &runAt, &attempt, &maxAttempts, &state,
			&lastErr, &key, &createdAt, &cursor); err != nil {
			rows.Close()
			b.end(ctx)
			return nil, failed(ctx, "export", err)
		}
		b.cursor = cursor.Int64
		if !id.Valid {
			continue // the one row of an empty batch
		}
		j.ID, j.Queue, j.Priority, j.RunAt = id.Int64, qname.String, priority.Int16, runAt.Time
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
			if _, err = b.tx.Exec(ctx, b.d.moveSQL(moveDeleteSQL), ids); err != nil {
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
// made valid (NULs dropped, bad bytes replaced); a dedupe key that is not
// valid text fails with queue.ErrInvalidJob.
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
		payloads                       = make([][]byte, n)
		priorities                     = make([]int16, n)
		runAts, createdAts             = make([]time.Time, n), make([]time.Time, n)
		attempts, maxAttempts          = make([]int32, n), make([]int32, n)
	)
	if err := movekit.Importable(jobs); err != nil {
		return nil, err
	}
	for i, j := range jobs {
		queues[i], states[i], keys[i] = j.Queue, string(j.State), j.DedupeKey
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
		added, err := queryIDs(ctx, tx, d.moveSQL(moveImportSQL), queues, payloads, priorities, runAts, attempts,
			maxAttempts, states, lastErrs, keys, createdAts)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, d.moveSQL(moveStoredSQL), queues, keys)
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
			if _, err := tx.Exec(ctx, moveNotifySQL, ch, queues); err != nil {
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

// collectStored reads rows of moveStoredSQL.
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
			&lastErr, &j.DedupeKey, &j.CreatedAt)
		j.Attempt, j.MaxAttempts, j.State, j.LastError = int(attempt), int(maxTries), queue.State(state), lastErr.String
		if j.Payload == nil {
			j.Payload = []byte{}
		}
		return &j, err
	})
}

// Stored implements queue.Mover with moveStoredSQL, outside a transaction.
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
	rows, err := d.pool.Query(ctx, d.moveSQL(moveStoredSQL), queues, dedupe)
	if err != nil {
		return nil, interpret("stored", err)
	}
	out, err := collectStored(rows)
	if err != nil {
		return nil, interpret("stored", err)
	}
	return out, nil
}
