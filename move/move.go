// Package move moves stored jobs from one dbq queue table to another, in
// any database dbq supports, while producers and workers keep running on
// both.
//
// Every dialect stores the same job schema, so a job moves whole: queue,
// payload bytes, priority, run_at, attempt, max_attempts, last_error,
// created_at and state (ready, scheduled or dead). Each batch is
//
//  1. exported on the source: up to Batch jobs that no one holds, locked
//     in a source transaction so that live workers skip them (SQLite, with
//     one writer, makes its workers wait instead);
//  2. imported on the destination in one transaction, each with a dedupe
//     key that names it on the source: its own key when it has one, else
//     "dbq-move:<source hash>:<source id>". A job whose key the
//     destination already stores is not stored twice;
//  3. deleted on the source, committing the source transaction.
//
// Killed at any instant, a move leaves every job on the source, the
// destination, or (killed between the destination's commit and the
// source's) both; a rerun finds those by their keys, stores nothing twice
// and deletes them on the source, so it ends as one uninterrupted run
// would. Only a job caught in that last window, between two commits, can
// run twice: on both sides if workers take it on each before the rerun,
// or twice on the destination if a worker there completes it (freeing its
// key) before the rerun stores it again. The synthesized keys name the
// source by its identity (PostgreSQL's system identifier, MySQL's server,
// the SQLite file) and table, which does not change with the address a
// move connects to; Options.SourceID overrides it.
//
// Jobs workers hold on the source are left to them: a worker completes
// them, or fails or releases them and a later pass moves them. Run passes
// until one moves nothing, or with Follow until the source holds none of
// the selected jobs. Follow ends the first time it finds the source empty,
// so point producers elsewhere before relying on it.
//
// # Verification
//
// A job is checked as it moves: the destination reads each job of a batch
// back inside its transaction, and one that has a moved job's key but
// another queue, payload or priority (a job of the destination's own, even
// one a producer commits while the import runs) is a conflict: the source
// job stays where it is and the run reports it. A dedupe key the
// destination cannot store (PostgreSQL and SQL Server keep keys as text:
// no NUL, valid UTF-8) is rejected the same way, job by job.
//
// When the last pass ends, the run verifies what the destination really
// holds: it reads every job it deleted on the source back from the
// destination by key, outside any batch, and compares it with the job as
// the source held it — the destination id the import stored it under, and
// the Checksum of its queue, payload bytes, priority, run_at, attempt,
// max_attempts, state, last_error and created_at. A job that differs is a
// mismatch (the run fails with ErrMismatch, naming the fields), unless its
// queue, payload, priority, max_attempts and created_at are the source's
// and a worker on the destination has taken it since: it is held, or
// retried or snoozed (a later attempt or run_at). Those are counted as
// Worked, and jobs no longer there (completed or cancelled on the
// destination) as Gone. The report sums both sides: the source's jobs as
// exported, the destination's as read back. For this the run keeps about
// 150 bytes per moved job in memory (more for jobs with long dedupe keys of
// their own), and reads each moved job once more, in chunks of 1,000.
//
// Moved jobs that had no dedupe key keep the synthesized one on the
// destination; it only keeps them unique there.
//
// # Cutover
//
// Point producers at the destination, run the move until the source is
// empty (Follow, or reruns), then stop the old workers. Workers on both
// sides may run throughout.
package move

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/movekit"
	"github.com/dbqueue/dbq/queue"
)

// Errors of a move, found before anything is moved (but ErrMismatch).
var (
	// ErrSameDatabase: source and destination are the same jobs table.
	ErrSameDatabase = errors.New("dbq: move: source and destination are the same jobs table")
	// ErrDestinationNotMigrated: the destination has no dbq tables; migrate
	// it first (dbq move --migrate, or dbq migrate).
	ErrDestinationNotMigrated = errors.New("dbq: move: the destination is not migrated")
	// ErrTooLarge: a source job holds a payload or dedupe key larger than
	// the destination stores.
	ErrTooLarge = errors.New("dbq: move: a job is too large for the destination")
	// ErrMismatch: a moved job is not on the destination as the source
	// held it, or jobs were left in conflict or rejected.
	ErrMismatch = errors.New("dbq: move: moved jobs do not match")
)

// Default Options values.
const (
	DefaultBatch        = 500
	MaxBatch            = 5000
	DefaultPollInterval = time.Second
)

// Options tunes a move. The zero value moves every queue's ready,
// scheduled and dead jobs in batches of DefaultBatch.
type Options struct {
	// Queues limits the move to these queues; empty means all.
	Queues []string
	// Ready, Scheduled and Dead choose the states moved. All false means
	// all three.
	Ready, Scheduled, Dead bool
	// Batch is the most jobs one batch moves; default DefaultBatch.
	Batch int
	// DryRun checks and counts, and moves nothing.
	DryRun bool
	// Follow keeps moving, polling every PollInterval, until the source
	// holds no selected job and none held, as in a cutover. Otherwise the
	// move ends after a pass that moved nothing.
	Follow       bool
	PollInterval time.Duration
	// SourceID names the source in the synthesized dedupe keys. Default:
	// the source's identity (database address and table). Set it when that
	// address changes between runs of one move.
	SourceID string
	// Progress, when set, is called after each batch.
	Progress func(Progress)
	// Logger receives a line per pass; default slog.Default().
	Logger *slog.Logger
}

// Progress is the state of a running move.
type Progress struct {
	Moved   int64 // jobs moved so far (new on the destination, or found there)
	Total   int64 // the selected jobs the source held when the move began
	Elapsed time.Duration
}

// Side sums one side of a move: on the source, the jobs the run deleted
// there, as exported; on the destination, those jobs as the verification
// read them back (none for a job gone from it).
type Side struct {
	Identity string `json:"identity"`
	Jobs     int64  `json:"jobs"`
	// Ready and Scheduled count ready jobs whose run_at was before or after
	// the move began; Held, jobs a destination worker held when read back.
	Ready     int64 `json:"ready"`
	Scheduled int64 `json:"scheduled"`
	Dead      int64 `json:"dead"`
	Held      int64 `json:"held,omitempty"`
	// Checksum sums Checksum over the jobs; the order of jobs does not
	// matter.
	Checksum string `json:"checksum"`
	sum      uint64
}

// Report is what a move did.
type Report struct {
	Source      Side `json:"source"`
	Destination Side `json:"destination"`
	// Moved counts jobs stored on the destination by this run; Found those
	// an earlier, interrupted run had stored. Both are deleted on the source.
	Moved int64 `json:"moved"`
	Found int64 `json:"found"`
	// Conflicts counts source jobs left in place because the destination
	// holds another job with their key; Rejected those whose dedupe key the
	// destination cannot store (not UTF-8 text, for PostgreSQL and SQL
	// Server). Both make the run unverified.
	Conflicts int64 `json:"conflicts"`
	Rejected  int64 `json:"rejected"`
	// Mismatched counts moved jobs the destination does not hold as the
	// source held them; it makes the run unverified. Worked counts moved
	// jobs destination workers have held, retried or snoozed since, and
	// Gone those no longer on the destination (completed or cancelled
	// there): they are compared on what no worker changes.
	Mismatched int64 `json:"mismatched"`
	Worked     int64 `json:"worked"`
	Gone       int64 `json:"gone"`
	// Left counts the selected jobs still on the source at the end, Held
	// those of them workers held.
	Left   int64 `json:"left"`
	Held   int64 `json:"held"`
	Passes int   `json:"passes"`
	// Planned is, on a dry run, what the source holds to move.
	Planned        int64         `json:"planned,omitempty"`
	DryRun         bool          `json:"dry_run,omitempty"`
	Elapsed        time.Duration `json:"-"`
	ElapsedSeconds float64       `json:"elapsed_seconds"`
	JobsPerSecond  float64       `json:"jobs_per_second"`
}

// Verified reports whether every moved job was found on the destination
// as the source held it (or as destination workers left it), and nothing
// conflicted or was rejected. When destination workers touched no moved
// job, both sides' counts and checksums are then equal.
func (r *Report) Verified() bool {
	if r.Mismatched != 0 || r.Conflicts != 0 || r.Rejected != 0 || r.Source.Jobs != r.Destination.Jobs+r.Gone {
		return false
	}
	return r.Worked+r.Gone > 0 || r.Source.sum == r.Destination.sum
}

// Run moves jobs from src to dst as opts says and reports what it did.
// It checks first, moving nothing when: either driver cannot move jobs
// (queue.ErrUnsupported), both are the same table (ErrSameDatabase), the
// destination is not migrated (ErrDestinationNotMigrated), a selected job
// is too large for the destination (ErrTooLarge), or opts are bad
// (queue.ErrInvalidConfig, dialect errors for bad queue names). A run whose
// sides do not match returns its report and ErrMismatch.
func Run(ctx context.Context, src, dst *queue.Queue, opts Options) (*Report, error) {
	m, err := prepare(ctx, src, dst, opts)
	if err != nil {
		return nil, err
	}
	return m.run(ctx)
}

type mover struct {
	src, dst   queue.Mover
	srcQ       *queue.Queue
	opts       Options
	filter     queue.ExportFilter
	keyPrefix  string
	report     Report
	start      time.Time
	total      int64
	limits     queue.MoveLimits
	conflicted map[int64]bool // source jobs left in place: a conflict or a rejected key
	rejected   map[int64]bool
	moved      []movedJob // every job deleted on the source, to verify
	mismatches []string   // the first few mismatches, for the error
	log        *slog.Logger
}

func prepare(ctx context.Context, src, dst *queue.Queue, opts Options) (*mover, error) {
	sm, dm := src.Driver(), dst.Driver()
	if opts.Batch == 0 {
		opts.Batch = DefaultBatch
	}
	if opts.Batch < 0 || opts.Batch > MaxBatch {
		return nil, fmt.Errorf("%w: batch %d out of range 1..%d", queue.ErrInvalidConfig, opts.Batch, MaxBatch)
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if !opts.Ready && !opts.Scheduled && !opts.Dead {
		opts.Ready, opts.Scheduled, opts.Dead = true, true, true
	}
	for _, q := range opts.Queues {
		if err := dialect.ValidateQueue(q); err != nil {
			return nil, err
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	m := &mover{
		src: sm, dst: dm, srcQ: src, opts: opts, log: opts.Logger,
		filter: queue.ExportFilter{
			Queues: slices.Clone(opts.Queues),
			Ready:  opts.Ready, Scheduled: opts.Scheduled, Dead: opts.Dead,
			Limit: opts.Batch,
		},
		conflicted: map[int64]bool{},
		rejected:   map[int64]bool{},
	}
	var err error
	if m.report.Source.Identity, err = sm.Identity(ctx); err != nil {
		return nil, fmt.Errorf("dbq: move: source: %w", err)
	}
	if m.report.Destination.Identity, err = dm.Identity(ctx); err != nil {
		return nil, fmt.Errorf("dbq: move: destination: %w", err)
	}
	if m.report.Source.Identity == m.report.Destination.Identity {
		return nil, fmt.Errorf("%w: %s", ErrSameDatabase, m.report.Source.Identity)
	}
	if _, err := dst.Stats(ctx); err != nil {
		if errors.Is(err, queue.ErrNotMigrated) {
			return nil, fmt.Errorf("%w: %s: %w", ErrDestinationNotMigrated, m.report.Destination.Identity, err)
		}
		return nil, fmt.Errorf("dbq: move: destination: %w", err)
	}
	sid := opts.SourceID
	if sid == "" {
		sid = m.report.Source.Identity
	}
	h := sha256.Sum256([]byte(sid))
	m.keyPrefix = "dbq-move:" + hex.EncodeToString(h[:6]) + ":"
	if err := m.checkSizes(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// checkSizes compares the largest selected job on the source with what the
// destination stores; a synthesized key is at most keyPrefix + 20 digits.
func (m *mover) checkSizes(ctx context.Context) error {
	s, err := m.src.Survey(ctx, m.filter)
	if err != nil {
		return fmt.Errorf("dbq: move: source: %w", err)
	}
	l, err := m.dst.Limits(ctx)
	if err != nil {
		return fmt.Errorf("dbq: move: destination: %w", err)
	}
	m.limits = l
	synth := int64(len(m.keyPrefix) + 20)
	switch {
	case l.Payload > 0 && s.MaxPayload > l.Payload:
		return fmt.Errorf("%w: a payload of %d bytes; the destination stores at most %d", ErrTooLarge, s.MaxPayload, l.Payload)
	case l.KeyBytes > 0 && max(s.MaxKeyBytes, synth) > l.KeyBytes:
		return fmt.Errorf("%w: a dedupe key of %d bytes; the destination stores at most %d", ErrTooLarge, max(s.MaxKeyBytes, synth), l.KeyBytes)
	case l.KeyChars > 0 && max(s.MaxKeyChars, synth) > l.KeyChars:
		return fmt.Errorf("%w: a dedupe key of %d characters; the destination stores at most %d", ErrTooLarge, max(s.MaxKeyChars, synth), l.KeyChars)
	}
	return nil
}

// count returns the selected jobs the source stores and how many of the
// selected queues' jobs are held.
func (m *mover) count(ctx context.Context) (selected, held int64, err error) {
	stats, err := m.srcQ.Stats(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("dbq: move: source: %w", err)
	}
	for _, s := range stats {
		if len(m.opts.Queues) > 0 && !slices.Contains(m.opts.Queues, s.Queue) {
			continue
		}
		if m.opts.Ready {
			selected += s.Ready
		}
		if m.opts.Scheduled {
			selected += s.Scheduled
		}
		if m.opts.Dead {
			selected += s.Dead
		}
		held += s.Held
	}
	return selected, held, nil
}

func (m *mover) run(ctx context.Context) (*Report, error) {
	m.start = time.Now()
	defer m.finish()
	var err error
	if m.total, _, err = m.count(ctx); err != nil {
		return nil, err
	}
	if m.opts.DryRun {
		m.report.DryRun, m.report.Planned = true, m.total
		m.report.Left, m.report.Held, err = m.count(ctx)
		return &m.report, err
	}
	for {
		m.report.Passes++
		moved, err := m.pass(ctx)
		if err != nil {
			return &m.report, err
		}
		m.log.Info("dbq: move: pass", "pass", m.report.Passes, "moved", moved,
			"total_moved", m.report.Moved+m.report.Found, "conflicts", m.report.Conflicts)
		if moved > 0 {
			continue
		}
		left, held, err := m.count(ctx)
		if err != nil {
			return &m.report, err
		}
		if !m.opts.Follow || left+held <= int64(len(m.conflicted)+len(m.rejected)) {
			break
		}
		t := time.NewTimer(m.opts.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return &m.report, ctx.Err()
		case <-t.C:
		}
	}
	if err := m.verify(ctx); err != nil {
		return &m.report, err
	}
	if m.report.Left, m.report.Held, err = m.count(ctx); err != nil {
		return &m.report, err
	}
	if r := &m.report; !r.Verified() {
		var detail string
		if len(m.mismatches) > 0 {
			detail = " (" + strings.Join(m.mismatches, "; ") + ")"
		}
		return r, fmt.Errorf("%w: %d moved jobs differ on the destination%s; source %d jobs, checksum %s; destination %d jobs, checksum %s, %d gone; %d conflicts, %d keys rejected",
			ErrMismatch, r.Mismatched, detail, r.Source.Jobs, sumHex(r.Source.sum), r.Destination.Jobs,
			sumHex(r.Destination.sum), r.Gone, r.Conflicts, r.Rejected)
	}
	return &m.report, nil
}

func (m *mover) finish() {
	r := &m.report
	r.Elapsed = time.Since(m.start)
	r.ElapsedSeconds = r.Elapsed.Seconds()
	if s := r.Elapsed.Seconds(); s > 0 {
		r.JobsPerSecond = float64(r.Moved+r.Found) / s
	}
	r.Source.Checksum, r.Destination.Checksum = sumHex(r.Source.sum), sumHex(r.Destination.sum)
}

// pass walks the source once in id order and returns the jobs it moved.
func (m *mover) pass(ctx context.Context) (int64, error) {
	var moved int64
	f := m.filter
	f.AfterID = 0
	for {
		n, cursor, err := m.batch(ctx, f)
		moved += n
		if err != nil || cursor == 0 {
			return moved, err
		}
		f.AfterID = cursor
	}
}

// batch moves one batch and returns how many jobs it moved and the cursor.
func (m *mover) batch(ctx context.Context, f queue.ExportFilter) (int64, int64, error) {
	b, err := m.src.Export(ctx, f)
	if err != nil {
		return 0, 0, fmt.Errorf("dbq: move: export: %w", err)
	}
	defer func() { _ = b.Rollback() }() // an export only reads
	jobs := b.Jobs()
	if len(jobs) == 0 {
		return 0, b.Cursor(), nil
	}
	out := make([]*queue.Job, 0, len(jobs))
	sent := make([]*queue.Job, 0, len(jobs)) // the source jobs of out
	for _, j := range jobs {
		c := *j
		if c.DedupeKey == "" {
			c.DedupeKey = m.keyPrefix + strconv.FormatInt(j.ID, 10)
		} else if m.limits.TextKeys && movekit.ValidText(c.DedupeKey) != c.DedupeKey {
			if !m.rejected[j.ID] {
				m.rejected[j.ID] = true
				m.log.Warn("dbq: move: the destination stores only UTF-8 text keys without NUL; left on the source",
					"id", j.ID, "queue", j.Queue)
			}
			continue
		}
		out, sent = append(out, &c), append(sent, j)
	}
	var stored []queue.Imported
	if len(out) > 0 {
		if stored, err = m.dst.Import(ctx, out); err != nil {
			return 0, 0, fmt.Errorf("dbq: move: import: %w", err)
		}
	}
	done := make([]int64, 0, len(jobs))
	kept := make([]movedJob, 0, len(jobs))
	var src Side
	var moved, found int64
	for i, j := range sent {
		s := stored[i]
		// Even a job the import stored may meet another with its key: one a
		// producer on the destination committed between the look-up and
		// the insert. Only the same job counts as moved.
		if !sameJob(j, s.Job) {
			if !m.conflicted[j.ID] {
				m.conflicted[j.ID] = true
				m.log.Warn("dbq: move: the destination holds another job with this job's key; left on the source",
					"id", j.ID, "queue", j.Queue, "dedupe_key", out[i].DedupeKey, "destination_id", s.Job.ID)
			}
			continue
		}
		delete(m.conflicted, j.ID)
		done = append(done, j.ID)
		k := m.keep(j, out[i].DedupeKey, s.Job.ID)
		src.add(j, k.sum, m.start)
		kept = append(kept, k)
		if s.New {
			moved++
		} else {
			found++ // stored by an interrupted run
		}
	}
	if err := b.Commit(ctx, done); err != nil {
		// The destination holds the batch and the source still does: a
		// rerun finds them by key.
		return 0, 0, fmt.Errorf("dbq: move: delete on the source (a rerun completes this batch): %w", err)
	}
	r := &m.report
	r.Moved += moved
	r.Found += found
	r.Conflicts, r.Rejected = int64(len(m.conflicted)), int64(len(m.rejected))
	r.Source.merge(src)
	m.moved = append(m.moved, kept...)
	if m.opts.Progress != nil {
		m.opts.Progress(Progress{Moved: r.Moved + r.Found, Total: m.total, Elapsed: time.Since(m.start)})
	}
	return moved + found, b.Cursor(), nil
}

// sameJob: the stored job is the one moved earlier, not a job of the
// destination's own that shares its key.
func sameJob(a, b *queue.Job) bool {
	return a.Queue == b.Queue && a.Priority == b.Priority && string(a.Payload) == string(b.Payload)
}

// add counts job j, whose Checksum is sum.
func (s *Side) add(j *queue.Job, sum uint64, start time.Time) {
	s.Jobs++
	switch {
	case j.State == queue.StateDead:
		s.Dead++
	case j.State == queue.StateClaimed:
		s.Held++
	case j.RunAt.After(start):
		s.Scheduled++
	default:
		s.Ready++
	}
	s.sum += sum
}

func (s *Side) merge(o Side) {
	s.Jobs += o.Jobs
	s.Ready += o.Ready
	s.Scheduled += o.Scheduled
	s.Dead += o.Dead
	s.Held += o.Held
	s.sum += o.sum
}

// Checksum is the hash a move compares and sums per job: the first 8
// bytes of SHA-256 over its queue, payload, priority, run_at (UTC
// microseconds), attempt, max_attempts, state, last_error (as valid text:
// NULs dropped, invalid UTF-8 replaced, as text columns store it) and
// created_at (UTC microseconds), each length-prefixed. The id and the
// dedupe key, which a move changes or looks jobs up by, are not in it.
func Checksum(j *queue.Job) uint64 {
	h := sha256.New()
	var n [8]byte
	num := func(v int64) {
		binary.BigEndian.PutUint64(n[:], uint64(v))
		h.Write(n[:])
	}
	bytes := func(b []byte) {
		num(int64(len(b)))
		h.Write(b)
	}
	bytes([]byte(j.Queue))
	bytes(j.Payload)
	num(int64(j.Priority))
	num(j.RunAt.UnixMicro())
	num(int64(j.Attempt))
	num(int64(j.MaxAttempts))
	bytes([]byte(j.State))
	bytes([]byte(movekit.ValidText(j.LastError)))
	num(j.CreatedAt.UnixMicro())
	if j.Kind != "" { // a job with no kind sums as before kinds existed
		bytes([]byte(j.Kind))
	}
	return binary.BigEndian.Uint64(h.Sum(nil))
}

func sumHex(v uint64) string { return fmt.Sprintf("%016x", v) }
