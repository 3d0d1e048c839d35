package postgres

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

// Every path a job's columns travel carries its kind: a batch Enqueue
// outside and inside pgx and database/sql transactions, EnqueueUnique, a
// schedule tick's job, a plain-SQL insert (no kind), both claimers, Jobs
// under every filter, and StatsByKind with held jobs.
func TestKindTravelsEveryPath(t *testing.T) {
	t.Parallel()
	for _, s := range []Strategy{Advisory, SkipLocked} {
		t.Run(s.String(), func(t *testing.T) {
			t.Parallel()
			testKindTravels(t, s)
		})
	}
}

func testKindTravels(t *testing.T, s Strategy) {
	ctx := testCtx(t)
	q := newQueue(t, Config{Strategy: s}, true)
	d := driverOf(t, q)
	want := map[int64]string{} // id: kind
	add := func(ids []int64, kinds ...string) {
		t.Helper()
		for i, id := range ids {
			want[id] = kinds[i]
		}
	}

	got, err := q.Enqueue(ctx,
		queue.NewJob{Queue: "a", Kind: "email"},
		queue.NewJob{Queue: "a"},
		queue.NewJob{Queue: "b", Kind: "résumé"}) // multi-byte: text, not bytes
	if err != nil {
		t.Fatal(err)
	}
	add(got, "email", "", "résumé")

	tx, commit := pgxTx(t, q)
	if got, err = q.EnqueueTx(ctx, tx, queue.NewJob{Queue: "a", Kind: "resize"}); err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	add(got, "resize")

	tx, commit = sqlTx(t, q)
	if got, err = q.EnqueueTx(ctx, tx, queue.NewJob{Queue: "b", Kind: "email"}, queue.NewJob{Queue: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := commit(); err != nil {
		t.Fatal(err)
	}
	add(got, "email", "")

	id, _, err := q.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "a", Kind: "resize", DedupeKey: "u"})
	if err != nil {
		t.Fatal(err)
	}
	add([]int64{id}, "resize")

	if err := d.UpsertSchedule(ctx, queue.ScheduleDef{Name: "nightly", Spec: "@daily", TimeZone: "UTC", Queue: "b"}); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Truncate(time.Second)
	r, err := d.AdvanceSchedule(ctx, queue.Tick{Schedule: "nightly", At: at, Next: at.Add(24 * time.Hour),
		Job: queue.NewJob{Queue: "b", Kind: "report", DedupeKey: "nightly@" + at.String()}})
	if err != nil || !r.Advanced || r.JobID == 0 {
		t.Fatalf("AdvanceSchedule = %+v, %v", r, err)
	}
	add([]int64{r.JobID}, "report")

	insertRaw(t, q, map[string]any{"queue": "a", "payload": []byte("raw")})
	all, err := q.Jobs(ctx, queue.JobFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	add([]int64{all[len(all)-1].ID}, "")
	if len(all) != len(want) {
		t.Fatalf("Jobs lists %d jobs, want %d", len(all), len(want))
	}
	for _, j := range all {
		if j.Kind != want[j.ID] {
			t.Errorf("Jobs: job %d has kind %q, want %q", j.ID, j.Kind, want[j.ID])
		}
	}

	// Claim: every claimed job carries its kind. Queue a has 5 jobs.
	c := newClaimer(t, q)
	claimed := claim(t, c, "a", 3)
	if len(claimed) != 3 {
		t.Fatalf("claimed %d jobs, want 3", len(claimed))
	}
	for _, j := range claimed {
		if j.Kind != want[j.ID] {
			t.Errorf("Claim: job %d has kind %q, want %q", j.ID, j.Kind, want[j.ID])
		}
	}
	// One dead job of kind email in queue b.
	if _, err := d.Pool().Exec(ctx, "UPDATE "+d.Table()+" SET state = 'dead' WHERE queue = 'b' AND kind = 'email'"); err != nil {
		t.Fatal(err)
	}

	all, err = q.Jobs(ctx, queue.JobFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, qf := range []string{"", "a", "b", "c"} {
		for _, kf := range []string{"", "email", "resize", "résumé", "none"} {
			for _, sf := range jobsStates {
				f := queue.JobFilter{Queue: qf, Kind: kf, State: sf, Limit: 100}
				var wantIDs []int64
				for _, j := range all {
					if (qf == "" || j.Queue == qf) && (kf == "" || j.Kind == kf) && (sf == "" || j.State == sf) {
						wantIDs = append(wantIDs, j.ID)
					}
				}
				jobs, err := q.Jobs(ctx, f)
				if err != nil {
					t.Fatalf("Jobs(%+v): %v", f, err)
				}
				if got := ids(jobs); !slices.Equal(got, wantIDs) {
					t.Errorf("Jobs(queue %q, kind %q, state %q) = %v, want %v", qf, kf, sf, got, wantIDs)
				}
			}
		}
	}
	if jobs, err := q.Jobs(ctx, queue.JobFilter{Kind: "bad\xff", Limit: 100}); !errors.Is(err, queue.ErrInvalidJob) || len(jobs) != 0 {
		t.Errorf("Jobs(kind not UTF-8) = %d jobs, %v; want ErrInvalidJob", len(jobs), err)
	}

	byKind, err := q.StatsByKind(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]int64{}
	for _, j := range claimed {
		held[j.Kind]++
	}
	wantStats := []queue.KindStats{
		{Queue: "a", Kind: "", Ready: 2 - held[""], Held: held[""]},
		{Queue: "a", Kind: "email", Ready: 1 - held["email"], Held: held["email"]},
		{Queue: "a", Kind: "resize", Ready: 2 - held["resize"], Held: held["resize"]},
		{Queue: "b", Kind: "", Ready: 1},
		{Queue: "b", Kind: "email", Dead: 1},
		{Queue: "b", Kind: "report", Ready: 1},
		{Queue: "b", Kind: "résumé", Ready: 1},
	}
	if !slices.Equal(byKind, wantStats) {
		t.Errorf("StatsByKind =\n%+v, want\n%+v", byKind, wantStats)
	}
}

// A kind PostgreSQL text cannot hold is refused before anything is sent,
// so the caller's transaction goes on; the column refuses more than 100
// bytes from whoever inserts them.
func TestKindNotText(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	q := newQueue(t, Config{}, true)
	d := driverOf(t, q)
	if _, err := d.Enqueue(ctx, nil, []queue.NewJob{{Queue: "a", Kind: "bad\xff"}}); !errors.Is(err, queue.ErrInvalidJob) {
		t.Errorf("Enqueue of a kind not UTF-8: %v, want ErrInvalidJob", err)
	}
	if _, _, err := d.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "a", Kind: "bad\xff", DedupeKey: "k"}); !errors.Is(err, queue.ErrInvalidJob) {
		t.Errorf("EnqueueUnique of a kind not UTF-8: %v, want ErrInvalidJob", err)
	}
	long := strings.Repeat("é", 51) // 51 characters, 102 bytes
	_, err := d.Pool().Exec(ctx, fmt.Sprintf("INSERT INTO %s (queue, payload, kind) VALUES ('a', '', $1)", d.Table()), long)
	if err == nil || !strings.Contains(err.Error(), "jobs_kind_check") {
		t.Errorf("insert of a 102-byte kind: %v, want the check to refuse it", err)
	}
}
