package mssql

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/movekit"
	"github.com/dbqueue/dbq/queue"
	mssqldb "github.com/microsoft/go-mssqldb"
)

var _ queue.Mover = (*Driver)(nil)

// maxParams is the most parameters SQL Server takes in one request.
const maxParams = 2100

// The most rows of one statement, each chunk's parameters under maxParams:
// the export filter's 6 besides its queues, 1 per id of a delete, 2 per
// key of a look-up, 11 per job of an insert.
const (
	moveFilterQueues = 2000
	moveDeleteChunk  = 2000
	moveKeyChunk     = 1000
	moveInsertChunk  = 180
)

// moveInsertBytes bounds the payload and error bytes of one insert
// statement, so that a batch of large jobs goes in several requests.
const moveInsertBytes = 32 << 20

// moveKeyUnits is the longest dedupe key in UTF-16 code units: the column
// is NVARCHAR(200).
const moveKeyUnits = 200

// moveTable is the quoted, qualified jobs table.
func (d *Driver) moveTable() string {
	n := d.cfg.Names().WithDefaults()
	return n.Qualified(dialect.MSSQL, n.Prefix+"jobs")
}

// Identity implements queue.Mover: sqlserver://server/database/table.
func (d *Driver) Identity(ctx context.Context) (string, error) {
	if d.closed.Load() {
		return "", queue.ErrClosed
	}
	var server, db sql.NullString
	if err := d.db.QueryRowContext(ctx, d.move.text(sqlMoveIdentity)).Scan(&server, &db); err != nil {
		return "", classify("identity", d.dedupe, err)
	}
	return "sqlserver://" + server.String + "/" + db.String + "/" + d.moveTable(), nil
}

// filtered returns move statement name with the queue list of f and the
// filter's parameters (@all_queues, @q<i>, @ready, @scheduled, @dead).
func (d *Driver) filtered(ctx context.Context, name, bfName string, f queue.ExportFilter) (string, []any, error) {
	n, args, err := moveFilter(f)
	if err != nil {
		return "", nil, err
	}
	stmt, err := d.variant(ctx, d.db, d.move, name, bfName, n)
	return stmt, args, err
}

// moveFilter returns the number of queue rows f needs and the filter's
// parameters.
func moveFilter(f queue.ExportFilter) (int, []any, error) {
	if len(f.Queues) > moveFilterQueues {
		return 0, nil, fmt.Errorf("%w: %d queues in an export filter (at most %d)", queue.ErrInvalidConfig, len(f.Queues), moveFilterQueues)
	}
	qs := f.Queues
	all := len(qs) == 0
	if all {
		qs = []string{""} // VALUES needs a row; @all_queues = 1 ignores it
	}
	args := make([]any, 0, len(qs)+4)
	for i, q := range qs {
		if !all {
			if err := dialect.ValidateQueue(q); err != nil {
				return 0, nil, err
			}
		}
		args = append(args, named("q", i, mssqldb.VarChar(q)))
	}
	args = append(args, sql.Named("all_queues", bit(all)), sql.Named("ready", bit(f.Ready)),
		sql.Named("scheduled", bit(f.Scheduled)), sql.Named("dead", bit(f.Dead)))
	return len(qs), args, nil
}

// Survey implements queue.Mover. MaxKeyChars counts UTF-16 code units, one
// more than the characters for each character outside the BMP; the key
// column holds at most 200 of them. It needs SQL Server 2019 or later
// (UTF-8 collations) to measure keys in UTF-8 bytes.
func (d *Driver) Survey(ctx context.Context, f queue.ExportFilter) (queue.Survey, error) {
	var s queue.Survey
	if d.closed.Load() {
		return s, queue.ErrClosed
	}
	stmt, args, err := d.filtered(ctx, sqlMoveSurvey, sqlBabelfishMoveSurvey, f)
	if err != nil {
		return s, err
	}
	if err := d.db.QueryRowContext(ctx, stmt, args...).Scan(&s.MaxPayload, &s.MaxKeyBytes, &s.MaxKeyChars); err != nil {
		return s, classify("survey", d.dedupe, err)
	}
	return s, nil
}

// Limits implements queue.Mover: payload is VARBINARY(MAX), 2^31-1 bytes;
// dedupe_key is NVARCHAR(200), 200 UTF-16 code units, so 200 characters
// of the BMP (Import rejects a longer key with queue.ErrInvalidJob).
func (d *Driver) Limits(context.Context) (queue.MoveLimits, error) {
	return queue.MoveLimits{Payload: 1<<31 - 1, KeyChars: moveKeyUnits, TextKeys: true}, nil
}

// Export implements queue.Mover. The batch holds a transaction, and so a
// pool connection, until it ends; its jobs are update-locked, as export.sql
// says, so claimers pass them over. Cursor is the largest id returned:
// READPAST hides the rows others hold locked, so the export cannot see
// past them.
func (d *Driver) Export(ctx context.Context, f queue.ExportFilter) (queue.ExportBatch, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	if f.Limit <= 0 {
		return nil, queue.ErrInvalidLimit
	}
	stmt, args, err := d.filtered(ctx, sqlMoveExport, sqlBabelfishMoveExport, f)
	if err != nil {
		return nil, err
	}
	args = append(args, sql.Named("limit", int64(f.Limit)), sql.Named("after", f.AfterID))
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, classify("export", d.dedupe, err)
	}
	b := &exportBatch{d: d, tx: tx}
	rows, err := tx.QueryContext(ctx, stmt, args...)
	if err == nil {
		b.jobs, err = scanMoved(rows)
	}
	if err != nil {
		_ = tx.Rollback()
		return nil, classify("export", d.dedupe, err)
	}
	if n := len(b.jobs); n > 0 {
		b.cursor = b.jobs[n-1].ID
	}
	return b, nil
}

// scanMoved reads rows of jobs columns in the order export.sql and
// stored.sql give them, and closes rows.
func scanMoved(rows *sql.Rows) ([]*queue.Job, error) {
	defer rows.Close()
	var out []*queue.Job
	for rows.Next() {
		var (
			j            queue.Job
			state        string
			lastErr, key sql.NullString
		)
		if err := rows.Scan(&j.ID, &j.Queue, &j.Kind, &j.Payload, &j.Priority, &j.RunAt, &j.Attempt, &j.MaxAttempts,
			&state, &lastErr, &key, &j.CreatedAt); err != nil {
			return nil, err
		}
		if j.Payload == nil {
			j.Payload = []byte{}
		}
		j.State, j.LastError, j.DedupeKey = queue.State(state), lastErr.String, key.String
		j.RunAt, j.CreatedAt = j.RunAt.UTC(), j.CreatedAt.UTC()
		out = append(out, &j)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

type exportBatch struct {
	d      *Driver
	tx     *sql.Tx
	jobs   []*queue.Job
	cursor int64
	once   sync.Once
}

func (b *exportBatch) Jobs() []*queue.Job { return b.jobs }
func (b *exportBatch) Cursor() int64      { return b.cursor }

// Commit deletes the jobs of ids and their dedupe keys in the batch's
// transaction and commits it. It fails, changing nothing, when an id is
// not a job the batch holds.
func (b *exportBatch) Commit(ctx context.Context, ids []int64) error {
	err := queue.ErrClosed
	b.once.Do(func() {
		if err = b.delete(ctx, ids); err != nil {
			_ = b.tx.Rollback()
			return
		}
		err = classify("export commit", b.d.dedupe, b.tx.Commit())
	})
	return err
}

func (b *exportBatch) delete(ctx context.Context, ids []int64) error {
	ids = distinctIDs(ids)
	held := make(map[int64]bool, len(b.jobs))
	for _, j := range b.jobs {
		held[j.ID] = true
	}
	for _, id := range ids {
		if !held[id] {
			return fmt.Errorf("%w: export commit: job %d is not in the batch", queue.ErrInvalidJob, id)
		}
	}
	for start := 0; start < len(ids); start += moveDeleteChunk {
		chunk := ids[start:min(start+moveDeleteChunk, len(ids))]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = named("i", i, id)
		}
		stmt, err := b.d.move.rows(sqlMoveDelete, len(chunk))
		if err != nil {
			return err
		}
		got, err := dialect.QueryIDs(ctx, b.tx, stmt, args...)
		if err != nil {
			return classify("export commit", b.d.dedupe, err)
		}
		if len(got) != len(chunk) {
			return fmt.Errorf("dbq: export commit: deleted %d of %d jobs the batch holds", len(got), len(chunk))
		}
	}
	return nil
}

func (b *exportBatch) Rollback() error {
	b.once.Do(func() { _ = b.tx.Rollback() })
	return nil
}

// moveKey is a job's (queue, dedupe key).
type moveKey struct{ queue, key string }

// Import implements queue.Mover, in one transaction: every key is looked
// up under a lock held to the end (existing.sql), the jobs whose keys are
// missing are inserted with their keys in chunks under the parameter
// limit, and every job is read back by key. A job whose key appears twice
// in jobs is stored once. A last_error is made valid text and cut to
// queue.MaxErrorBytes, as Retry cuts it; a queue name or kind that is not
// valid, or a dedupe key over 200 UTF-16 code units, fails with an error
// and stores nothing.
func (d *Driver) Import(ctx context.Context, jobs []*queue.Job) ([]queue.Imported, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	var keys []moveKey
	first := map[moveKey]*queue.Job{}
	for _, j := range jobs {
		if err := importable(j); err != nil {
			return nil, err
		}
		k := moveKey{j.Queue, j.DedupeKey}
		if first[k] == nil {
			first[k] = j
			keys = append(keys, k)
		}
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, classify("import", d.dedupe, err)
	}
	defer func() { _ = tx.Rollback() }()
	existing, err := d.existingKeys(ctx, tx, keys)
	if err != nil {
		return nil, classify("import", d.dedupe, err)
	}
	var missing []*queue.Job
	for _, k := range keys {
		if !existing[k] {
			missing = append(missing, first[k])
		}
	}
	added, err := d.insertMoved(ctx, tx, missing)
	if err != nil {
		return nil, classify("import", d.dedupe, err)
	}
	isNew := movekit.IDSet(added)
	var out []queue.Imported
	// A held job moves between jobs and jobs_inflight when it is released
	// or retried; a read that crosses the move misses it, and a read again
	// finds it.
	for try := 1; ; try++ {
		stored, err := d.storedByKey(ctx, tx, keys)
		if err != nil {
			return nil, classify("import", d.dedupe, err)
		}
		out, err = movekit.Match("mssql", jobs, stored, isNew)
		if err == nil {
			break
		}
		if try == 3 {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, classify("import", d.dedupe, err)
	}
	return out, nil
}

// importable checks a job for Import: what every dialect checks, and what
// the columns of this one store.
func importable(j *queue.Job) error {
	if err := movekit.Importable([]*queue.Job{j}); err != nil {
		return err
	}
	if err := dialect.ValidateQueue(j.Queue); err != nil {
		return fmt.Errorf("import of job %d: %w", j.ID, err)
	}
	if j.Kind != "" {
		if err := queue.ValidateStoredKind(j.Kind); err != nil {
			return fmt.Errorf("import of job %d: %w", j.ID, err)
		}
		if err := checkKind(j.Kind); err != nil {
			return fmt.Errorf("import of job %d: %w", j.ID, err)
		}
	}
	if n := len(utf16.Encode([]rune(j.DedupeKey))); n > moveKeyUnits {
		return fmt.Errorf("%w: import of job %d: dedupe key of %d UTF-16 code units (at most %d)", queue.ErrInvalidJob, j.ID, n, moveKeyUnits)
	}
	return nil
}

// keyArgs are the (@q<i>, @k<i>) parameters of keys.
func keyArgs(keys []moveKey) []any {
	args := make([]any, 0, 2*len(keys))
	for i, k := range keys {
		args = append(args, named("q", i, mssqldb.VarChar(k.queue)), named("k", i, k.key))
	}
	return args
}

// queryKeys runs move statement name with a VALUES row for each of keys.
func (d *Driver) queryKeys(ctx context.Context, tx dialect.Querier, name string, keys []moveKey) (*sql.Rows, error) {
	stmt, err := d.move.rows(name, len(keys))
	if err != nil {
		return nil, err
	}
	return tx.QueryContext(ctx, stmt, keyArgs(keys)...)
}

// existingKeys locks keys in jobs_dedupe to the end of tx and returns those
// it records.
func (d *Driver) existingKeys(ctx context.Context, tx *sql.Tx, keys []moveKey) (map[moveKey]bool, error) {
	out := map[moveKey]bool{}
	for start := 0; start < len(keys); start += moveKeyChunk {
		chunk := keys[start:min(start+moveKeyChunk, len(keys))]
		rows, err := d.queryKeys(ctx, tx, sqlMoveExisting, chunk)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var k moveKey
			var id int64
			if err := rows.Scan(&k.queue, &k.key, &id); err != nil {
				rows.Close()
				return nil, err
			}
			out[k] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Stored implements queue.Mover with stored.sql, outside a transaction. A
// job that moves between jobs and jobs_inflight (claimed, released) while
// the statement runs may be missed; package move reads a missing key again.
func (d *Driver) Stored(ctx context.Context, keys []queue.JobKey) ([]*queue.Job, error) {
	if d.closed.Load() {
		return nil, queue.ErrClosed
	}
	mk := make([]moveKey, len(keys))
	for i, k := range keys {
		mk[i] = moveKey{k.Queue, k.DedupeKey}
	}
	out, err := d.storedByKey(ctx, d.db, mk)
	if err != nil {
		return nil, classify("stored", d.dedupe, err)
	}
	return out, nil
}

// storedByKey reads the stored jobs with keys, in tx or on the pool.
func (d *Driver) storedByKey(ctx context.Context, tx dialect.Querier, keys []moveKey) ([]*queue.Job, error) {
	var out []*queue.Job
	for start := 0; start < len(keys); start += moveKeyChunk {
		chunk := keys[start:min(start+moveKeyChunk, len(keys))]
		rows, err := d.queryKeys(ctx, tx, sqlMoveStored, chunk)
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

// insertMoved inserts jobs as they are, in chunks of at most
// moveInsertChunk jobs and about moveInsertBytes, and returns their ids.
func (d *Driver) insertMoved(ctx context.Context, tx *sql.Tx, jobs []*queue.Job) ([]int64, error) {
	var ids []int64
	for len(jobs) > 0 {
		n, size := 0, 0
		for n < len(jobs) && n < moveInsertChunk && (n == 0 || size+len(jobs[n].Payload)+len(jobs[n].LastError) <= moveInsertBytes) {
			size += len(jobs[n].Payload) + len(jobs[n].LastError)
			n++
		}
		chunk := jobs[:n]
		jobs = jobs[n:]
		stmt, err := d.variant(ctx, tx, d.move, sqlMoveInsert, sqlBabelfishMoveInsert, len(chunk))
		if err != nil {
			return nil, err
		}
		got, err := dialect.QueryIDs(ctx, tx, stmt, insertArgs(chunk)...)
		if err != nil {
			return nil, err
		}
		if len(got) != len(chunk) {
			return nil, fmt.Errorf("dbq: import: %d ids back for %d jobs", len(got), len(chunk))
		}
		ids = append(ids, got...)
	}
	return ids, nil
}

// insertArgs are the parameters of insert.sql's rows for jobs.
func insertArgs(jobs []*queue.Job) []any {
	args := make([]any, 0, 11*len(jobs))
	for i, j := range jobs {
		payload := j.Payload
		if payload == nil {
			payload = []byte{}
		}
		created := j.CreatedAt
		if created.IsZero() {
			created = time.Now()
		}
		var lastErr sql.NullString
		if j.LastError != "" {
			lastErr = sql.NullString{String: truncateUTF8(movekit.ValidText(j.LastError), queue.MaxErrorBytes), Valid: true}
		}
		args = append(args,
			named("q", i, mssqldb.VarChar(j.Queue)), named("kn", i, j.Kind), named("p", i, payload), named("pr", i, j.Priority),
			named("ra", i, j.RunAt.UTC()), named("a", i, int32(j.Attempt)), named("ma", i, int32(j.MaxAttempts)),
			named("s", i, mssqldb.VarChar(string(j.State))), named("e", i, lastErr), named("k", i, j.DedupeKey),
			named("c", i, created.UTC()))
	}
	return args
}
