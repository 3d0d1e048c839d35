package mysql

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// TestKindsTravelWithJobs: a job's kind is stored as given and compared
// byte for byte (a trailing space, which a plain INSERT may store, case,
// non-ASCII, 100 bytes; kinds that are not UTF-8 never get here), by every path that writes or reads a job:
// Enqueue, EnqueueUnique, a schedule's tick, both claim paths, Jobs and its
// filter, StatsByKind, and move's Export, Stored and Import.
func TestKindsTravelWithJobs(t *testing.T) {
	t.Parallel()
	q, d := openQueue(t, Config{}, true)
	ctx := context.Background()
	kinds := []string{"", "email", "email ", "Email", "é日本", strings.Repeat("k", queue.MaxKindLen)}
	var jobs []queue.NewJob
	for i, k := range kinds {
		jobs = append(jobs, queue.NewJob{Queue: "k", Kind: k, Payload: []byte{byte(i)}, DedupeKey: "key" + string(rune('a'+i))})
	}
	// Through the driver: "email " breaks queue.ValidateKind's rule, but a
	// producer's plain INSERT may store it.
	ids, err := d.Enqueue(ctx, nil, jobs)
	if err != nil {
		t.Fatal(err)
	}
	kindOf := map[int64]string{}
	for i, id := range ids {
		kindOf[id] = kinds[i]
	}
	check := func(what string, got []*queue.Job) {
		t.Helper()
		for _, j := range got {
			if want, ok := kindOf[j.ID]; ok && j.Kind != want {
				t.Errorf("%s: job %d has kind %q, want %q", what, j.ID, j.Kind, want)
			}
		}
	}

	uid, existed, err := d.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "u", Kind: "email ", DedupeKey: "once"})
	if err != nil || existed {
		t.Fatalf("EnqueueUnique: %v, existed %v", err, existed)
	}
	kindOf[uid] = "email "
	now := time.Now().UTC().Truncate(time.Second)
	if err := d.UpsertSchedule(ctx, queue.ScheduleDef{Name: "s", Spec: "@every 1m", TimeZone: "UTC", Queue: "u", NextTick: now}); err != nil {
		t.Fatal(err)
	}
	res, err := d.AdvanceSchedule(ctx, queue.Tick{Schedule: "s", At: now, Next: now.Add(time.Minute),
		Job: queue.NewJob{Queue: "u", Kind: "report", DedupeKey: "s@" + now.Format(time.RFC3339)}})
	if err != nil || !res.Advanced || res.JobID == 0 {
		t.Fatalf("AdvanceSchedule: %+v, %v", res, err)
	}
	kindOf[res.JobID] = "report"

	all, err := q.Jobs(ctx, queue.JobFilter{})
	if err != nil || len(all) != len(kindOf) {
		t.Fatalf("Jobs: %d jobs, %v; want %d", len(all), err, len(kindOf))
	}
	check("Jobs", all)
	for _, f := range []queue.JobFilter{
		{Kind: "email "}, {Queue: "k", Kind: "email"}, {Queue: "k", State: queue.StateReady, Kind: "Email"},
		{State: queue.StateReady, Kind: "é日本"}, {Kind: strings.Repeat("k", queue.MaxKindLen)},
	} {
		got, err := q.Jobs(ctx, f)
		if err != nil {
			t.Fatalf("Jobs(%+v): %v", f, err)
		}
		var want []int64
		for _, j := range all {
			if j.Kind == f.Kind && (f.Queue == "" || j.Queue == f.Queue) {
				want = append(want, j.ID)
			}
		}
		if !slices.Equal(queue.IDs(got), want) || len(want) == 0 {
			t.Errorf("Jobs(%+v) = %v, want %v", f, queue.IDs(got), want)
		}
	}
	if got, err := q.Jobs(ctx, queue.JobFilter{Kind: "email", State: queue.StateDead}); err != nil || len(got) != 0 {
		t.Errorf("Jobs(kind email, dead) = %d jobs, %v; want none", len(got), err)
	}

	byKind, err := q.StatsByKind(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var want []queue.KindStats
	for _, k := range kinds {
		want = append(want, queue.KindStats{Queue: "k", Kind: k, Ready: 1})
	}
	slices.SortFunc(want, func(a, b queue.KindStats) int { return strings.Compare(a.Kind, b.Kind) })
	want = append(want, queue.KindStats{Queue: "u", Kind: "email ", Ready: 1}, queue.KindStats{Queue: "u", Kind: "report", Ready: 1})
	if !slices.Equal(byKind, want) {
		t.Errorf("StatsByKind =\n%+v\nwant\n%+v", byKind, want)
	}

	// Both claim paths: the locked rows as read, and read back by token.
	c := newClaimer(t, q)
	got, err := c.Claim(ctx, "k", 3)
	if err != nil || len(got) != 3 {
		t.Fatalf("Claim: %d, %v", len(got), err)
	}
	check("Claim", got)
	c.d.readBack = true
	rest, err := c.Claim(ctx, "k", 10)
	if err != nil || len(rest) != len(kinds)-3 {
		t.Fatalf("Claim, read back: %d, %v", len(rest), err)
	}
	check("Claim, read back", rest)
	if err := c.Release(ctx, leases(append(got, rest...))); err != nil {
		t.Fatal(err)
	}
	byKind, err = q.StatsByKind(ctx)
	if err != nil || len(byKind) != len(want) {
		t.Fatalf("StatsByKind after release: %+v, %v", byKind, err)
	}

	// Move: Export and Stored return the kind, Import stores it.
	b, err := d.Export(ctx, queue.ExportFilter{Queues: []string{"k"}, Ready: true, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	exported := b.Jobs()
	if err := b.Rollback(); err != nil {
		t.Fatal(err)
	}
	if len(exported) != len(kinds) {
		t.Fatalf("exported %d jobs, want %d", len(exported), len(kinds))
	}
	check("Export", exported)
	var keys []queue.JobKey
	var moved []*queue.Job
	for _, j := range exported {
		keys = append(keys, queue.JobKey{Queue: j.Queue, DedupeKey: j.DedupeKey})
		m := *j
		m.Queue = "moved"
		moved = append(moved, &m)
	}
	stored, err := d.Stored(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	check("Stored", stored)
	imported, err := d.Import(ctx, moved)
	if err != nil || len(imported) != len(moved) {
		t.Fatalf("Import: %d, %v", len(imported), err)
	}
	for i, im := range imported {
		if !im.New || im.Job.Kind != moved[i].Kind || im.Job.Queue != "moved" {
			t.Errorf("imported %+v as queue %q kind %q, want new, kind %q", im, im.Job.Queue, im.Job.Kind, moved[i].Kind)
		}
	}
	again, err := q.Jobs(ctx, queue.JobFilter{Queue: "moved", Kind: "email "})
	if err != nil || len(again) != 1 || again[0].Kind != "email " {
		t.Errorf("Jobs(moved, kind %q) = %d jobs, %v", "email ", len(again), err)
	}
}

// A producer's plain INSERT that names no kind stores a job of kind "".
func TestKindDefaultsToEmpty(t *testing.T) {
	t.Parallel()
	q, d := openQueue(t, Config{}, true)
	ctx := context.Background()
	insertRaw(t, q, map[string]any{"queue": "p", "payload": []byte("x")})
	insertRaw(t, q, map[string]any{"queue": "p", "payload": []byte("y"), "kind": "typed"})
	got, err := d.Jobs(ctx, queue.JobFilter{Queue: "p"})
	if err != nil || len(got) != 2 || got[0].Kind != "" || got[1].Kind != "typed" {
		t.Fatalf("Jobs = %d, %v", len(got), err)
	}
}
