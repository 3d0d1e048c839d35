package mssql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	mssqldb "github.com/microsoft/go-mssqldb"
)

// fakeListRow is one row of jobs.sql, in listColumns order.
func fakeListRow(id int64, state string) []driver.Value {
	now := time.Now()
	var token, until any
	if state == "claimed" {
		token, until = id*10, now.Add(time.Minute)
	}
	kind := ""
	if id%2 == 0 {
		kind = "email"
	}
	return []driver.Value{id, "q", kind, []byte("p"), int64(1), now, int64(2), int64(25), state,
		token, until, nil, "k", now}
}

// idsArg returns the ids a statement over an id list was sent, in order.
func idsArg(s sentStmt) []int64 {
	var ids []int64
	for i := 0; ; i++ {
		v, ok := s.args[fmt.Sprint("i", i)]
		if !ok {
			return ids
		}
		ids = append(ids, v.(int64))
	}
}

// Cancel and RetryDead by id send each id once, at most idChunk a
// statement, and return what the statements report, sorted.
func TestIDListsAreChunkedAndDistinct(t *testing.T) {
	ctx := context.Background()
	q, _, f := newFakeQueue(t, Config{}, answerOK)
	ids := make([]int64, 0, 2*idChunk+11)
	for i := range cap(ids) - 1 {
		ids = append(ids, int64(cap(ids)-i)) // descending
	}
	ids = append(ids, ids[0]) // a repeat
	got, err := q.Cancel(ctx, ids...)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(distinctIDs(ids)))
	if !slices.Equal(got, want) {
		t.Fatalf("Cancel returned %d ids, want the %d distinct ones sorted", len(got), len(want))
	}
	var sent []int64
	for _, s := range f.named(sqlCancel) {
		n := len(idsArg(s))
		if n == 0 || n > idChunk {
			t.Errorf("a cancel statement with %d ids", n)
		}
		sent = append(sent, idsArg(s)...)
	}
	if len(f.named(sqlCancel)) != 3 || len(sent) != len(want) || !slices.Equal(slices.Sorted(slices.Values(sent)), want) {
		t.Errorf("%d cancel statements sent %d ids, want 3 sending each of %d once", len(f.named(sqlCancel)), len(sent), len(want))
	}

	got, err = q.RetryDead(ctx, "q", 9, 3, 9)
	if err != nil || !slices.Equal(got, []int64{3, 9}) {
		t.Fatalf("RetryDead(ids) = %v, %v", got, err)
	}
	s := f.named(sqlRetryDeadIDs)
	if len(s) != 1 || !slices.Equal(idsArg(s[0]), []int64{9, 3}) || s[0].args["queue"] != mssqldb.VarChar("q") {
		t.Errorf("retry_dead_ids sent %v", s)
	}
	// No ids at all: nothing is sent.
	before := len(f.statements())
	if got, err := q.Cancel(ctx); err != nil || got != nil || len(f.statements()) != before {
		t.Errorf("Cancel() = %v, %v after %d statements", got, err, len(f.statements())-before)
	}
}

// RetryDead with no ids revives the queue's dead jobs a batch at a time
// until a batch comes back short.
func TestRetryDeadAllLoopsInBatches(t *testing.T) {
	ctx := context.Background()
	round := 0
	q, _, f := newFakeQueue(t, Config{}, func(s sentStmt) fakeAnswer {
		if s.name != sqlRetryDeadAll {
			return answerOK(s)
		}
		round++
		n := retryDeadBatch
		if round == 3 {
			n = 2
		}
		rows := make([][]driver.Value, n)
		for i := range rows {
			rows[i] = []driver.Value{int64(round*10_000 - i)}
		}
		return fakeAnswer{rows: rows}
	})
	got, err := q.RetryDead(ctx, "q")
	if err != nil || len(got) != 2*retryDeadBatch+2 || !slices.IsSorted(got) {
		t.Fatalf("RetryDead = %d ids (sorted %v), %v", len(got), slices.IsSorted(got), err)
	}
	sent := f.named(sqlRetryDeadAll)
	if len(sent) != 3 {
		t.Fatalf("%d statements, want 3", len(sent))
	}
	for _, s := range sent {
		if s.args["batch"] != int32(retryDeadBatch) || s.args["queue"] != mssqldb.VarChar("q") {
			t.Errorf("retry_dead_all args %v", s.args)
		}
	}
	if _, err := q.RetryDead(ctx, "bad queue"); !errors.Is(err, queue.ErrInvalidQueue) {
		t.Errorf("bad queue: %v", err)
	}
}

// EnqueueUnique runs in the driver's transaction or in the caller's,
// inside a savepoint it rolls back on failure; a deadlock victim in its
// own transaction runs again.
func TestEnqueueUniqueTransactions(t *testing.T) {
	ctx := context.Background()
	existed := func(s sentStmt) fakeAnswer {
		if s.name == sqlEnqueueUnique {
			return fakeAnswer{rows: [][]driver.Value{{int64(7), true}}}
		}
		return answerOK(s)
	}
	q, d, f := newFakeQueue(t, Config{}, existed)
	job := queue.NewJob{Queue: "q", DedupeKey: "k", Payload: []byte("x"), Priority: -2, Delay: 1500 * time.Millisecond}
	id, ex, err := q.EnqueueUnique(ctx, nil, job)
	if err != nil || id != 7 || !ex {
		t.Fatalf("EnqueueUnique = %d, %v, %v; want 7, true", id, ex, err)
	}
	s := f.named(sqlEnqueueUnique)
	if len(s) != 1 || !s[0].tx {
		t.Fatalf("enqueue_unique sent %d times, in a transaction: %v", len(s), len(s) == 1 && s[0].tx)
	}
	a := s[0].args
	if a["queue"] != mssqldb.VarChar("q") || a["dedupe_key"] != "k" || a["priority"] != int16(-2) ||
		a["delay_s"] != int32(1) || a["delay_ms"] != int32(500) || a["max_attempts"] != int32(q.Config().MaxAttempts) {
		t.Errorf("arguments %v", a)
	}

	// The caller's transaction: a savepoint first, undone on failure.
	fail := true
	q2, d2, f2 := newFakeQueue(t, Config{}, func(s sentStmt) fakeAnswer {
		if s.name == sqlEnqueueUnique && fail {
			return fakeAnswer{err: serverErr(547, 3621)}
		}
		return answerOK(s)
	})
	tx, err := d2.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, _, err := q2.EnqueueUnique(ctx, tx, job); err == nil || errors.Is(err, queue.ErrDuplicate) {
		t.Fatalf("failed EnqueueUnique in a transaction: %v", err)
	}
	fail = false
	if id, ex, err := q2.EnqueueUnique(ctx, tx, job); err != nil || id != 42 || ex {
		t.Fatalf("EnqueueUnique in a transaction = %d, %v, %v", id, ex, err)
	}
	var names []string
	for _, s := range f2.statements() {
		if !s.tx {
			t.Errorf("%s sent outside the caller's transaction", s.name)
		}
		names = append(names, s.name)
	}
	want := []string{sqlSavepoint, sqlEnqueueUnique, sqlRollbackSavepoint, sqlSavepoint, sqlEnqueueUnique}
	if !slices.Equal(names, want) {
		t.Errorf("sent %v, want %v", names, want)
	}

	// A deadlock victim in the driver's own transaction runs again, in a
	// new transaction.
	victim := true
	q3, _, f3 := newFakeQueue(t, Config{}, func(s sentStmt) fakeAnswer {
		if s.name == sqlEnqueueUnique && victim {
			victim = false
			return fakeAnswer{err: serverErr(1205)}
		}
		return answerOK(s)
	})
	if id, _, err := q3.EnqueueUnique(ctx, nil, job); err != nil || id != 42 {
		t.Fatalf("EnqueueUnique after a deadlock = %d, %v", id, err)
	}
	if n := len(f3.named(sqlEnqueueUnique)); n != 2 {
		t.Errorf("%d runs, want 2", n)
	}

	if _, _, err := q.EnqueueUnique(ctx, "not a tx", job); !errors.Is(err, queue.ErrUnsupportedTx) {
		t.Errorf("other tx type: %v", err)
	}
	if _, _, err := d.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "q"}); !errors.Is(err, queue.ErrInvalidJob) {
		t.Errorf("no dedupe key: %v", err)
	}
}

// Jobs sends its filters as typed bind parameters and reads both tables'
// rows: held ones with their lease, others without; a job read twice while
// it moved is listed once.
func TestJobsScan(t *testing.T) {
	ctx := context.Background()
	q, _, f := newFakeQueue(t, Config{}, func(s sentStmt) fakeAnswer {
		if s.name == sqlJobs {
			return fakeAnswer{rows: [][]driver.Value{fakeListRow(3, "dead"), fakeListRow(4, "ready"),
				fakeListRow(4, "claimed"), fakeListRow(6, "claimed")}}
		}
		return answerOK(s)
	})
	got, err := q.Jobs(ctx, queue.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if ids := queue.IDs(got); !slices.Equal(ids, []int64{3, 4, 6}) {
		t.Fatalf("listed %v, want [3 4 6]", ids)
	}
	if j := got[2]; j.State != queue.StateClaimed || j.Token != 60 || j.ClaimedUntil.IsZero() || j.DedupeKey != "k" || j.Attempt != 2 ||
		j.Kind != "email" {
		t.Errorf("held job %+v", j)
	}
	if j := got[0]; j.State != queue.StateDead || j.Token != 0 || !j.ClaimedUntil.IsZero() || j.LastError != "" || j.Kind != "" {
		t.Errorf("dead job %+v", j)
	}
	if _, err := q.Jobs(ctx, queue.JobFilter{Queue: "q", State: queue.StateReady, AfterID: 9, Limit: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Jobs(ctx, queue.JobFilter{Kind: "email"}); err != nil {
		t.Fatal(err)
	}
	sent := f.named(sqlJobs)
	want := []map[string]any{
		{"limit": int32(queue.DefaultListLimit), "after": int64(0), "queue": mssqldb.VarChar(""), "state": mssqldb.VarChar(""), "kind": ""},
		{"limit": int32(5), "after": int64(9), "queue": mssqldb.VarChar("q"), "state": mssqldb.VarChar("ready"), "kind": ""},
		{"limit": int32(queue.DefaultListLimit), "after": int64(0), "queue": mssqldb.VarChar(""), "state": mssqldb.VarChar(""), "kind": "email"},
	}
	if len(sent) != len(want) {
		t.Fatalf("%d statements sent, want %d", len(sent), len(want))
	}
	for i, s := range sent {
		if fmt.Sprint(s.args) != fmt.Sprint(want[i]) {
			t.Errorf("call %d: args %v, want %v", i, s.args, want[i])
		}
	}
}

// Retry sends a snooze as such, with no error and never dead, beside
// ordinary failures in the same statement.
func TestRetrySendsSnooze(t *testing.T) {
	ctx := context.Background()
	q, _, f := newFakeQueue(t, Config{}, answerOK)
	c, _ := q.NewClaimer(ctx)
	err := c.Retry(ctx, []queue.RetryParams{
		{Lease: queue.Lease{ID: 1, Token: 11}, Delay: 2500 * time.Millisecond, Error: "boom", Dead: true},
		{Lease: queue.Lease{ID: 2, Token: 22}, Delay: 3 * time.Second, Error: "ignored", Dead: true, Snooze: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := f.named(sqlRetry)
	if len(s) != 1 {
		t.Fatalf("%d retry statements", len(s))
	}
	a := s[0].args
	var got []string
	for _, k := range []string{"i", "t", "ds", "dm", "dd", "sn", "e"} {
		got = append(got, fmt.Sprintf("%s=%v/%v", k, a[k+"0"], a[k+"1"]))
	}
	if want := "i=1/2 t=11/22 ds=2/3 dm=500/0 dd=1/0 sn=0/1 e=boom/"; strings.Join(got, " ") != want {
		t.Errorf("rows %q, want %q", got, want)
	}
}

// Pause and Paused: typed parameters, names in the order the server gives.
func TestPauseStatements(t *testing.T) {
	ctx := context.Background()
	q, _, f := newFakeQueue(t, Config{}, answerOK)
	if err := q.Pause(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := q.Resume(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range f.named(sqlSetPaused) {
		got = append(got, fmt.Sprint(s.args["queue"], "=", s.args["paused"]))
		if s.tx {
			t.Error("set_paused sent in a transaction of the driver's; it has its own")
		}
	}
	if want := []string{"a=true", "a=false"}; !slices.Equal(got, want) {
		t.Errorf("set_paused sent %v, want %v", got, want)
	}
	names, err := q.Paused(ctx)
	if err != nil || !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("Paused = %v, %v", names, err)
	}
	if err := q.Pause(ctx, "no spaces"); !errors.Is(err, queue.ErrInvalidQueue) {
		t.Errorf("bad queue: %v", err)
	}
}

// A rescue pass that finds another pass holding the table's lock moves
// nothing and ends Rescue; a full pass is followed by another; every pass
// names the lock after its own table.
func TestRescueOnePassAtATime(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		passes [][2]int64 // (granted, moved) per pass
		moved  int
		sent   int
	}{
		{"lock held elsewhere", [][2]int64{{-1, 0}}, 0, 1},
		{"short pass", [][2]int64{{0, 3}}, 3, 1},
		{"full passes until a short one", [][2]int64{{0, RescueBatch}, {1, RescueBatch}, {0, 4}}, 2*RescueBatch + 4, 3},
		{"lock taken between passes", [][2]int64{{0, RescueBatch}, {-1, 0}}, RescueBatch, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := 0
			_, d, f := newFakeQueue(t, Config{}, func(s sentStmt) fakeAnswer {
				if s.name != sqlRescue {
					return answerOK(s)
				}
				p := tc.passes[min(i, len(tc.passes)-1)]
				i++
				return fakeAnswer{rows: [][]driver.Value{{p[0], p[1]}}}
			})
			n, err := d.Rescue(ctx)
			if err != nil || n != tc.moved {
				t.Fatalf("Rescue = %d, %v; want %d", n, err, tc.moved)
			}
			sent := f.named(sqlRescue)
			if len(sent) != tc.sent {
				t.Fatalf("%d passes, want %d", len(sent), tc.sent)
			}
			for _, s := range sent {
				if s.args["lock_resource"] != "dbq.rescue:[s1].[pfx_jobs_inflight]" || s.args["batch"] != int32(RescueBatch) {
					t.Errorf("rescue args %v", s.args)
				}
			}
		})
	}
}

// Each table has its own rescue lock, and no name is ever cut.
func TestLockResource(t *testing.T) {
	seen := map[string]dialect.Names{}
	long := strings.Repeat("s", 63)
	for _, n := range []dialect.Names{{}, {Prefix: "a_"}, {Schema: "x"}, {Schema: "x", Prefix: "a_"},
		{Schema: long, Prefix: strings.Repeat("p", dialect.MaxPrefixLen)}} {
		n = n.WithDefaults()
		if err := n.Validate(); err != nil {
			t.Fatal(err)
		}
		r := lockResource("rescue", n.Qualified(dialect.MSSQL, n.Prefix+"jobs_inflight"))
		if utf8.RuneCountInString(r) > maxLockResource {
			t.Errorf("%+v: %d characters", n, utf8.RuneCountInString(r))
		}
		if other, ok := seen[r]; ok {
			t.Errorf("%+v and %+v share lock %q", n, other, r)
		}
		seen[r] = n
	}
	// Past the limit (no valid Names get there): a fixed-length hash,
	// distinct for distinct tables.
	a, b := lockResource("rescue", strings.Repeat("t", 300)), lockResource("rescue", strings.Repeat("t", 299)+"u")
	if len(a) > maxLockResource || a == b || !strings.HasPrefix(a, "dbq.rescue:sha256:") {
		t.Errorf("long names: %q, %q", a, b)
	}
}

// Closed, every Admin method returns queue.ErrClosed and sends nothing.
func TestAdminAfterClose(t *testing.T) {
	ctx := context.Background()
	q, d, f := newFakeQueue(t, Config{}, answerOK)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	_, _, e1 := d.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "q", DedupeKey: "k"})
	_, e2 := d.Jobs(ctx, queue.JobFilter{})
	_, e3 := d.Cancel(ctx, []int64{1})
	_, e4 := d.RetryDead(ctx, "q", nil)
	e5 := d.SetPaused(ctx, "q", true)
	_, e6 := d.Paused(ctx)
	_, e7 := d.StatsByKind(ctx)
	for i, err := range []error{e1, e2, e3, e4, e5, e6, e7} {
		if !errors.Is(err, queue.ErrClosed) {
			t.Errorf("method %d: %v", i+1, err)
		}
	}
	if n := len(f.statements()); n != 0 {
		t.Errorf("%d statements sent", n)
	}
}

// A missing queues table (a schema migrated only to version 1) is
// reported as not migrated by the statements that read it.
func TestAdminNotMigrated(t *testing.T) {
	ctx := context.Background()
	q, _, _ := newFakeQueue(t, Config{}, func(s sentStmt) fakeAnswer { return fakeAnswer{err: serverErr(208)} })
	if err := q.Pause(ctx, "q"); !errors.Is(err, queue.ErrNotMigrated) {
		t.Errorf("Pause: %v", err)
	}
	if _, err := q.Paused(ctx); !errors.Is(err, queue.ErrNotMigrated) {
		t.Errorf("Paused: %v", err)
	}
	if _, _, err := q.EnqueueUnique(ctx, nil, queue.NewJob{Queue: "q", DedupeKey: "k"}); !errors.Is(err, queue.ErrNotMigrated) {
		t.Errorf("EnqueueUnique: %v", err)
	}
	if _, err := q.StatsByKind(ctx); !errors.Is(err, queue.ErrNotMigrated) {
		t.Errorf("StatsByKind: %v", err)
	}
}

// StatsByKind reads each row into its fields and returns them by queue,
// then kind in Go's byte order, which SQL Server's NVARCHAR order (by
// UTF-16 code unit) is not for characters outside the BMP.
func TestStatsByKind(t *testing.T) {
	ctx := context.Background()
	q, _, f := newFakeQueue(t, Config{}, func(s sentStmt) fakeAnswer {
		if s.name == sqlStatsByKind {
			// As the server orders them: "😀" (a surrogate pair) before "\uff01".
			return fakeAnswer{rows: [][]driver.Value{
				{"a", "", int64(1), int64(2), int64(3), int64(4)},
				{"a", "😀", int64(5), int64(0), int64(0), int64(0)},
				{"a", "\uff01", int64(0), int64(6), int64(0), int64(0)},
				{"b", "email", int64(0), int64(0), int64(7), int64(8)},
			}}
		}
		return answerOK(s)
	})
	got, err := q.StatsByKind(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []queue.KindStats{
		{Queue: "a", Kind: "", Ready: 1, Scheduled: 2, Held: 3, Dead: 4},
		{Queue: "a", Kind: "\uff01", Scheduled: 6},
		{Queue: "a", Kind: "😀", Ready: 5},
		{Queue: "b", Kind: "email", Held: 7, Dead: 8},
	}
	if !slices.Equal(got, want) {
		t.Errorf("StatsByKind = %+v, want %+v", got, want)
	}
	if sent := f.named(sqlStatsByKind); len(sent) != 1 || len(sent[0].args) != 0 {
		t.Errorf("sent %+v, want one statement with no parameters", sent)
	}
}

// TestInvalidUTF8KeysRefused: a dedupe key or kind that is not valid
// UTF-8, which NVARCHAR would store altered (each bad byte as U+FFFD), is
// refused with queue.ErrInvalidJob by Enqueue and EnqueueUnique, in the
// driver's own transaction or the caller's, before any statement is sent;
// a valid key or kind outside ASCII is sent as it is.
func TestInvalidUTF8KeysRefused(t *testing.T) {
	ctx := context.Background()
	q, d, f := newFakeQueue(t, Config{}, answerOK)
	db := d.db
	var jobs []queue.NewJob
	for _, s := range []string{"k\xff", "\xc3\x28", "ok-then-\xed\xa0\x80"} {
		jobs = append(jobs, queue.NewJob{Queue: "q", Payload: []byte("x"), DedupeKey: s},
			queue.NewJob{Queue: "q", Payload: []byte("x"), DedupeKey: "k", Kind: s})
	}
	for _, bad := range jobs {
		key := bad.DedupeKey + " kind " + bad.Kind
		if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "q"}, bad); !errors.Is(err, queue.ErrInvalidJob) {
			t.Errorf("Enqueue with key %q: %v, want ErrInvalidJob", key, err)
		}
		if _, _, err := q.EnqueueUnique(ctx, nil, bad); !errors.Is(err, queue.ErrInvalidJob) {
			t.Errorf("EnqueueUnique with key %q: %v, want ErrInvalidJob", key, err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.EnqueueTx(ctx, tx, bad); !errors.Is(err, queue.ErrInvalidJob) {
			t.Errorf("EnqueueTx with key %q: %v, want ErrInvalidJob", key, err)
		}
		if _, _, err := q.EnqueueUnique(ctx, tx, bad); !errors.Is(err, queue.ErrInvalidJob) {
			t.Errorf("EnqueueUnique in a tx with key %q: %v, want ErrInvalidJob", key, err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	if sent := f.statements(); len(sent) != 0 {
		t.Fatalf("sent %d statements for refused keys, first %q", len(sent), sent[0].query)
	}
	if _, err := q.Enqueue(ctx, queue.NewJob{Queue: "q", DedupeKey: "ключ-☃", Kind: "письмо"}); err != nil {
		t.Fatalf("Enqueue with a valid UTF-8 key: %v", err)
	}
	sent := f.named(sqlEnqueue)
	if len(sent) != 1 || sent[0].args["dk0"] != (sql.NullString{String: "ключ-☃", Valid: true}) || sent[0].args["kn0"] != "письмо" {
		t.Fatalf("enqueue sent %+v; want one statement with the key and kind as given", sent)
	}
}
