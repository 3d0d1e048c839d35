package move

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/dbqueue/dbq/internal/movekit"
	"github.com/dbqueue/dbq/queue"
)

// verifyChunk is the most keys one Stored call reads back.
const verifyChunk = 1000

// maxMismatches is the most mismatches the error of a run names.
const maxMismatches = 3

// movedJob is what a run keeps of a job it deleted on the source: the
// source job's fields (payload and last_error as hashes), its Checksum, and
// the destination id the import stored it under.
type movedJob struct {
	srcID, dstID         int64
	key                  string // its own dedupe key; "" for a synthesized one
	queue, kind          string
	payload, lastErr     uint64
	priority             int16
	attempt, maxAttempts int
	state                queue.State
	runAt, createdAt     int64 // UTC microseconds
	sum                  uint64
}

func hash64(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// fingerprint is j's fields as a movedJob holds them.
func fingerprint(j *queue.Job) movedJob {
	return movedJob{
		queue: j.Queue, kind: j.Kind, payload: hash64(j.Payload), lastErr: hash64([]byte(movekit.ValidText(j.LastError))),
		priority: j.Priority, attempt: j.Attempt, maxAttempts: j.MaxAttempts, state: j.State,
		runAt: j.RunAt.UnixMicro(), createdAt: j.CreatedAt.UnixMicro(), sum: Checksum(j),
	}
}

// keep records source job j, stored under key as destination job dstID.
func (m *mover) keep(j *queue.Job, key string, dstID int64) movedJob {
	p := fingerprint(j)
	p.srcID, p.dstID = j.ID, dstID
	if key != m.synthKey(j.ID) {
		p.key = key
	}
	return p
}

func (m *mover) synthKey(srcID int64) string { return m.keyPrefix + strconv.FormatInt(srcID, 10) }

func (m *mover) keyOf(p *movedJob) queue.JobKey {
	k := p.key
	if k == "" {
		k = m.synthKey(p.srcID)
	}
	return queue.JobKey{Queue: p.queue, DedupeKey: k}
}

// fields are the fields a movedJob holds; worker marks those a worker
// changes (a retry, a snooze, a claim).
var fields = []struct {
	name   string
	worker bool
	differ func(a, b *movedJob) bool
}{
	{"queue", false, func(a, b *movedJob) bool { return a.queue != b.queue }},
	{"kind", false, func(a, b *movedJob) bool { return a.kind != b.kind }},
	{"payload", false, func(a, b *movedJob) bool { return a.payload != b.payload }},
	{"priority", false, func(a, b *movedJob) bool { return a.priority != b.priority }},
	{"max_attempts", false, func(a, b *movedJob) bool { return a.maxAttempts != b.maxAttempts }},
	{"created_at", false, func(a, b *movedJob) bool { return a.createdAt != b.createdAt }},
	{"attempt", true, func(a, b *movedJob) bool { return a.attempt != b.attempt }},
	{"run_at", true, func(a, b *movedJob) bool { return a.runAt != b.runAt }},
	{"state", true, func(a, b *movedJob) bool { return a.state != b.state }},
	{"last_error", true, func(a, b *movedJob) bool { return a.lastErr != b.lastErr }},
}

// diff names the fields of got that differ from p, and whether all of them
// are fields a worker changes.
func diff(p, got *movedJob) (names []string, byWorker bool) {
	byWorker = true
	for _, f := range fields {
		if f.differ(p, got) {
			names = append(names, f.name)
			byWorker = byWorker && f.worker
		}
	}
	return names, byWorker
}

// verify reads every job the run deleted on the source back from the
// destination and compares it with the source job (see the package doc).
func (m *mover) verify(ctx context.Context) error {
	if len(m.moved) > 0 {
		m.log.Info("dbq: move: verifying the destination", "jobs", len(m.moved))
	}
	for start := 0; start < len(m.moved); start += verifyChunk {
		chunk := m.moved[start:min(start+verifyChunk, len(m.moved))]
		keys := make([]queue.JobKey, len(chunk))
		for i := range chunk {
			keys[i] = m.keyOf(&chunk[i])
		}
		stored, err := m.stored(ctx, keys)
		if err != nil {
			return fmt.Errorf("dbq: move: verify: %w", err)
		}
		for i := range chunk {
			m.check(&chunk[i], stored[keys[i]])
		}
	}
	return nil
}

// stored reads the destination's jobs with keys; a key it misses is read
// once more (a job a worker moves between tables as it is read: SQL
// Server's jobs and jobs_inflight).
func (m *mover) stored(ctx context.Context, keys []queue.JobKey) (map[queue.JobKey]*queue.Job, error) {
	out := make(map[queue.JobKey]*queue.Job, len(keys))
	read := func(keys []queue.JobKey) error {
		got, err := m.dst.Stored(ctx, keys)
		for _, j := range got {
			out[queue.JobKey{Queue: j.Queue, DedupeKey: j.DedupeKey}] = j
		}
		return err
	}
	if err := read(keys); err != nil {
		return nil, err
	}
	var missing []queue.JobKey
	for _, k := range keys {
		if out[k] == nil {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		if err := read(missing); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// check compares moved job p with got, the destination's job with its key
// (nil when there is none), and counts it in the report.
func (m *mover) check(p *movedJob, got *queue.Job) {
	r := &m.report
	if got == nil {
		r.Gone++
		return
	}
	g := fingerprint(got)
	r.Destination.add(got, g.sum, m.start)
	var why string
	switch {
	case got.ID != p.dstID:
		why = fmt.Sprintf("its key now names destination job %d, not job %d the move stored", got.ID, p.dstID)
	case g.sum == p.sum:
		return
	default:
		names, byWorker := diff(p, &g)
		if byWorker && (g.state == queue.StateClaimed || g.attempt > p.attempt || g.runAt > p.runAt) {
			r.Worked++ // held, retried or snoozed on the destination since
			return
		}
		if len(names) == 0 {
			why = "its checksum differs"
		} else {
			why = "its " + strings.Join(names, ", ") + " differ from the source's"
		}
	}
	r.Mismatched++
	msg := fmt.Sprintf("source job %d (queue %q) is destination job %d: %s", p.srcID, p.queue, got.ID, why)
	m.log.Warn("dbq: move: a moved job differs on the destination", "detail", msg)
	if len(m.mismatches) < maxMismatches {
		m.mismatches = append(m.mismatches, msg)
	}
}
