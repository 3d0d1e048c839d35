package mssql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	mssqldb "github.com/microsoft/go-mssqldb"
)

// Errors as go-mssqldb builds them: the last error of the request, with
// every error of it, first to last, in All.
func serverErr(nums ...int32) mssqldb.Error {
	all := make([]mssqldb.Error, len(nums))
	for i, n := range nums {
		all[i] = mssqldb.Error{Number: n, Class: 16, Message: messages[n]}
	}
	last := all[len(all)-1]
	last.All = all
	return last
}

var messages = map[int32]string{
	207:  "Invalid column name 'kind'.",
	208:  "Invalid object name 's1.pfx_jobs'.",
	547:  "The INSERT statement conflicted with the CHECK constraint.",
	1205: "Transaction (Process ID 57) was deadlocked on lock resources with another process and has been chosen as the deadlock victim. Rerun the transaction.",
	1222: "Lock request time out period exceeded.",
	2627: "Violation of PRIMARY KEY constraint 'pfx_jobs_dedupe_pk'. Cannot insert duplicate key in object 's1.pfx_jobs_dedupe'. The duplicate key value is (q, k).",
	3621: "The statement has been terminated.",
}

func dupErr() error { return serverErr(2627, 3621) }

func TestClassify(t *testing.T) {
	const dedupe = "pfx_jobs_dedupe"
	pkOfJobs := mssqldb.Error{Number: 2627, Message: "Violation of PRIMARY KEY constraint 'pfx_jobs_pk'. Cannot insert duplicate key in object 's1.pfx_jobs'."}
	for _, tc := range []struct {
		name       string
		err        error
		retryable  bool
		sentinel   error
		wantNumber int32
	}{
		{"1222 alone, no All", mssqldb.Error{Number: 1222}, true, nil, 1222},
		{"1222 not the last error", serverErr(1222, 3621), true, nil, 3621},
		{"1222 first of three", serverErr(1222, 3621, 3621), true, nil, 3621},
		{"1205 deadlock", serverErr(1205), true, nil, 1205},
		{"wrapped 1222", fmt.Errorf("claim: %w", serverErr(1222, 3621)), true, nil, 3621},
		{"twice wrapped 1205", fmt.Errorf("a: %w", fmt.Errorf("b: %w", serverErr(1205))), true, nil, 1205},
		{"208 not migrated", serverErr(208), false, queue.ErrNotMigrated, 208},
		{"207 migrated to an older version", serverErr(207), false, queue.ErrNotMigrated, 207},
		{"208 wrapped, not last", fmt.Errorf("x: %w", serverErr(208, 3621)), false, queue.ErrNotMigrated, 3621},
		{"2627 on the dedupe table", dupErr(), false, queue.ErrDuplicate, 3621},
		{"2601 on the dedupe table", mssqldb.Error{Number: 2601, Message: "Cannot insert duplicate key row in object 's1.pfx_jobs_dedupe'"}, false, queue.ErrDuplicate, 2601},
		{"2627 elsewhere is no dedupe collision", pkOfJobs, false, nil, 2627},
		{"a constraint error", serverErr(547, 3621), false, nil, 3621},
		// Babelfish for PostgreSQL reports a missing table or column with
		// PostgreSQL's message under a number of its own.
		{"Babelfish's missing table", mssqldb.Error{Number: 33557097, Message: `relation "master_s1.pfx_jobs" does not exist`}, false, queue.ErrNotMigrated, 33557097},
		{"Babelfish's missing column", mssqldb.Error{Number: 33557097, Message: `column "kind" does not exist`}, false, queue.ErrNotMigrated, 33557097},
		{"Babelfish's lock timeout (NOWAIT)", mssqldb.Error{Number: 33557097, Message: "canceling statement due to lock timeout"}, true, nil, 33557097},
		{"Babelfish's deadlock", mssqldb.Error{Number: 33557097, Message: "deadlock detected"}, true, nil, 33557097},
		{"Babelfish's catalog race", mssqldb.Error{Number: 33557097, Message: "tuple concurrently updated"}, true, nil, 33557097},
		{"another Babelfish error", mssqldb.Error{Number: 33557097, Message: `syntax error at or near "OUTPUT"`}, false, nil, 33557097},
		{"no server error", errors.New("i/o timeout"), false, nil, 0},
		{"context", context.Canceled, false, context.Canceled, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := classify("claim", dedupe, tc.err)
			if !strings.HasPrefix(got.Error(), "dbq: ") {
				t.Errorf("%q does not start with dbq:", got)
			}
			if queue.IsRetryable(got) != tc.retryable {
				t.Errorf("IsRetryable(%v) = %v", got, !tc.retryable)
			}
			if tc.retryable {
				var r *dialect.RetryableError
				if !errors.As(got, &r) {
					t.Errorf("%v is not a *dialect.RetryableError", got)
				}
			}
			for _, s := range []error{queue.ErrNotMigrated, queue.ErrDuplicate, context.Canceled} {
				if errors.Is(got, s) != (s == tc.sentinel) {
					t.Errorf("errors.Is(%v, %v) = %v", got, s, !(s == tc.sentinel))
				}
			}
			// The driver's error stays reachable.
			var e mssqldb.Error
			if errors.As(got, &e) != (tc.wantNumber != 0) || e.Number != tc.wantNumber {
				t.Errorf("errors.As mssql.Error: number %d, want %d", e.Number, tc.wantNumber)
			}
		})
	}
	if classify("x", "d", nil) != nil {
		t.Error("classify(nil) != nil")
	}
	if err := classify("enqueue", dedupe, serverErr(208)); !strings.Contains(err.Error(), "dbq migrate up") {
		t.Errorf("%q does not say how to migrate", err)
	}
}

// script returns a once function that replays errs, nil meaning success.
func script(errs ...error) (func(context.Context) (int, error), *int) {
	calls := 0
	return func(context.Context) (int, error) {
		calls++
		if calls > len(errs) {
			panic("called too often")
		}
		if err := errs[calls-1]; err != nil {
			return 0, err
		}
		return calls, nil
	}, &calls
}

func TestRetryConflicts(t *testing.T) {
	ctx := context.Background()
	var pauses []int
	pause := func(_ context.Context, attempt int) error { pauses = append(pauses, attempt); return nil }

	t.Run("retries 1222 and 1205 until success", func(t *testing.T) {
		pauses = nil
		once, calls := script(serverErr(1222, 3621), fmt.Errorf("w: %w", serverErr(1205)), nil)
		v, runs, err := retryConflicts(ctx, 5, pause, once)
		if err != nil || v != 3 || runs != 3 || *calls != 3 {
			t.Fatalf("v %d runs %d calls %d err %v", v, runs, *calls, err)
		}
		if fmt.Sprint(pauses) != "[1 2]" {
			t.Errorf("pauses %v, want [1 2]", pauses)
		}
	})
	t.Run("gives up after attempts", func(t *testing.T) {
		pauses = nil
		c := serverErr(1222, 3621)
		once, calls := script(c, c, c, c, c, c)
		_, runs, err := retryConflicts(ctx, 4, pause, once)
		if runs != 4 || *calls != 4 || len(pauses) != 3 {
			t.Fatalf("runs %d calls %d pauses %v", runs, *calls, pauses)
		}
		if !isConflict(err) || !strings.Contains(err.Error(), "gave up after 4 attempts") {
			t.Fatalf("err %v", err)
		}
		if !queue.IsRetryable(classify("claim", "d", err)) {
			t.Error("the final error is not retryable")
		}
	})
	t.Run("does not retry other errors", func(t *testing.T) {
		for _, e := range []error{serverErr(547, 3621), serverErr(208), errors.New("broken pipe"), context.DeadlineExceeded} {
			pauses = nil
			once, calls := script(e, nil)
			_, _, err := retryConflicts(ctx, 5, pause, once)
			if *calls != 1 || len(pauses) != 0 || !reflect.DeepEqual(err, e) {
				t.Errorf("%v: calls %d pauses %v err %v", e, *calls, pauses, err)
			}
		}
	})
	t.Run("stops when the context ends in a pause", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		once, calls := script(serverErr(1222), nil)
		_, _, err := retryConflicts(cctx, 5, jitterPause, once)
		if *calls != 1 || !errors.Is(err, context.Canceled) {
			t.Fatalf("calls %d err %v", *calls, err)
		}
	})
	t.Run("jitter stays short", func(t *testing.T) {
		for attempt := 1; attempt <= 20; attempt++ {
			start := time.Now()
			if err := jitterPause(ctx, attempt); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("pause %d took %v", attempt, d)
			}
		}
	})
}

// The claim's retry loop end to end, through database/sql, on built
// errors: what is retried, what is kept, what is given back.
func TestClaimRetriesOnBuiltErrors(t *testing.T) {
	ctx := context.Background()
	// claimAnswers answers the claim statements in turn from as; other
	// statements succeed.
	claimAnswers := func(as ...fakeAnswer) func(sentStmt) fakeAnswer {
		i := 0
		return func(s sentStmt) fakeAnswer {
			if s.name != sqlClaim {
				return answerOK(s)
			}
			i++
			return as[min(i, len(as))-1]
		}
	}
	rows := func(ids ...int64) [][]driver.Value {
		var out [][]driver.Value
		for _, id := range ids {
			out = append(out, fakeJobRow(id))
		}
		return out
	}

	t.Run("1222 not last, then 1205, then success", func(t *testing.T) {
		q, _, f := newFakeQueue(t, Config{}, claimAnswers(
			fakeAnswer{err: serverErr(1222, 3621)},
			fakeAnswer{err: fmt.Errorf("conn: %w", serverErr(1205))},
			fakeAnswer{rows: rows(7, 8)},
		))
		c, _ := q.NewClaimer(ctx)
		jobs, err := c.Claim(ctx, "q", 2)
		if err != nil || len(jobs) != 2 {
			t.Fatalf("Claim: %d jobs, %v", len(jobs), err)
		}
		claims := f.named(sqlClaim)
		if len(claims) != 3 {
			t.Fatalf("%d claim statements, want 3", len(claims))
		}
		if claims[0].args["token"] == claims[1].args["token"] || claims[1].args["token"] == claims[2].args["token"] {
			t.Error("a retry reused its token")
		}
		if jobs[0].Token != claims[2].args["token"] || jobs[0].State != queue.StateClaimed {
			t.Errorf("job token %d state %s, want the last claim's token %v", jobs[0].Token, jobs[0].State, claims[2].args["token"])
		}
		if n := len(f.named(sqlAbandon)); n != 0 {
			t.Errorf("%d abandons after server errors, which roll the statement back", n)
		}
	})
	t.Run("rows of a statement that then failed are discarded", func(t *testing.T) {
		q, _, f := newFakeQueue(t, Config{}, claimAnswers(
			fakeAnswer{rows: rows(1, 2, 3), rowsErr: serverErr(1222, 3621)},
			fakeAnswer{rows: rows(9)},
		))
		c, _ := q.NewClaimer(ctx)
		jobs, err := c.Claim(ctx, "q", 3)
		if err != nil || len(jobs) != 1 || jobs[0].ID != 9 {
			t.Fatalf("Claim: %v, %v; want only job 9", jobs, err)
		}
		if len(f.named(sqlClaim)) != 2 {
			t.Errorf("%d claim statements, want 2", len(f.named(sqlClaim)))
		}
	})
	t.Run("bounded", func(t *testing.T) {
		q, _, f := newFakeQueue(t, Config{ClaimAttempts: 3}, claimAnswers(fakeAnswer{err: serverErr(1222, 3621)}))
		c, _ := q.NewClaimer(ctx)
		_, err := c.Claim(ctx, "q", 1)
		if !queue.IsRetryable(err) || len(f.named(sqlClaim)) != 3 {
			t.Fatalf("err %v after %d claim statements, want retryable after 3", err, len(f.named(sqlClaim)))
		}
	})
	t.Run("not migrated is not retried", func(t *testing.T) {
		q, _, f := newFakeQueue(t, Config{}, func(s sentStmt) fakeAnswer { return fakeAnswer{err: serverErr(208)} })
		c, _ := q.NewClaimer(ctx)
		_, err := c.Claim(ctx, "q", 1)
		if !errors.Is(err, queue.ErrNotMigrated) || len(f.named(sqlClaim)) != 1 || len(f.named(sqlAbandon)) != 0 {
			t.Fatalf("err %v, %d claims, %d abandons", err, len(f.named(sqlClaim)), len(f.named(sqlAbandon)))
		}
	})
	t.Run("a claim cut off gives back what its token took", func(t *testing.T) {
		for _, cut := range []fakeAnswer{
			{err: context.Canceled},
			{rows: rows(1), rowsErr: context.DeadlineExceeded},
			{rows: rows(1), rowsErr: driver.ErrBadConn},
		} {
			q, _, f := newFakeQueue(t, Config{}, claimAnswers(cut))
			c, _ := q.NewClaimer(ctx)
			if _, err := c.Claim(ctx, "q", 1); err == nil || queue.IsRetryable(err) {
				t.Fatalf("cut-off claim: %v", err)
			}
			claims, abandons := f.named(sqlClaim), f.named(sqlAbandon)
			if len(claims) != 1 || len(abandons) != 1 || abandons[0].args["token"] != claims[0].args["token"] {
				t.Fatalf("%d claims, %d abandons; the abandon must carry the claim's token", len(claims), len(abandons))
			}
		}
	})
	t.Run("n, window and batch limits", func(t *testing.T) {
		q, _, f := newFakeQueue(t, Config{Claimers: 2}, answerOK)
		c, _ := q.NewClaimer(ctx)
		for _, n := range []int{5, 500, 5000} {
			if _, err := c.Claim(ctx, "q", n); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for _, s := range f.named(sqlClaim) {
			got = append(got, fmt.Sprintf("n=%v window=%v", s.args["n"], s.args["window"]))
		}
		want := []string{"n=5 window=200", "n=500 window=500", "n=1000 window=1000"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("claims %v, want %v", got, want)
		}
		if r := len(f.named(sqlRescue)); r != 1 {
			t.Errorf("%d rescues in three claims within a quarter lease, want 1", r)
		}
	})
	t.Run("bad input sends nothing", func(t *testing.T) {
		q, _, f := newFakeQueue(t, Config{}, answerOK)
		c, _ := q.NewClaimer(ctx)
		if _, err := c.Claim(ctx, "q", 0); !errors.Is(err, queue.ErrInvalidLimit) {
			t.Error(err)
		}
		if _, err := c.Claim(ctx, "bad queue", 1); !errors.Is(err, queue.ErrInvalidQueue) {
			t.Error(err)
		}
		if err := c.Retry(ctx, []queue.RetryParams{{Delay: -time.Second}}); !errors.Is(err, queue.ErrInvalidJob) {
			t.Error(err)
		}
		if err := c.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Claim(ctx, "q", 1); !errors.Is(err, queue.ErrClosed) {
			t.Error(err)
		}
		if err := c.Complete(ctx, []queue.Lease{{ID: 1, Token: 2}}); !errors.Is(err, queue.ErrClosed) {
			t.Error(err)
		}
		if n := len(f.statements()); n != 0 {
			t.Errorf("%d statements sent", n)
		}
	})
}

// Leases whose rows did not answer are lost; the others took effect; the
// claimer forgets what it no longer holds and Close gives back the rest.
func TestLeaseResults(t *testing.T) {
	ctx := context.Background()
	// Statements over leases take only even ids.
	evenOnly := func(s sentStmt) fakeAnswer {
		a := answerOK(s)
		if s.name == sqlComplete || s.name == sqlExtend || s.name == sqlRelease || s.name == sqlRetry {
			var rows [][]driver.Value
			for _, r := range a.rows {
				if r[0].(int64)%2 == 0 {
					rows = append(rows, r)
				}
			}
			a.rows = rows
		}
		return a
	}
	q, _, f := newFakeQueue(t, Config{}, evenOnly)
	c, _ := q.NewClaimer(ctx)
	jobs, err := c.Claim(ctx, "q", 3)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[int64]queue.Lease{}
	for _, j := range jobs {
		byID[j.ID] = j.Lease()
	}
	if len(byID) != 3 || byID[100].Token == 0 || byID[101].Token == 0 || byID[102].Token == 0 {
		t.Fatalf("claimed %v, want 100, 101 and 102", byID)
	}
	err = c.Extend(ctx, []queue.Lease{byID[100], byID[101], byID[100]})
	var lost *queue.LeaseLostError
	if !errors.As(err, &lost) || fmt.Sprint(lost.IDs) != "[101]" {
		t.Fatalf("Extend: %v, want 101 lost", err)
	}
	if ext := f.named(sqlExtend); len(ext) != 1 || len(ext[0].args) != 2+4 {
		t.Errorf("Extend sent %d statements; a lease given twice must be sent once", len(ext))
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// 101 was lost: Close releases only 100 and 102.
	rel := f.named(sqlRelease)
	if len(rel) != 1 || len(rel[0].args) != 4 {
		t.Fatalf("Close released %v", rel)
	}
	for _, id := range []int64{100, 102} {
		if rel[0].args["i0"] != id && rel[0].args["i1"] != id {
			t.Errorf("Close did not release %d: %v", id, rel[0].args)
		}
	}
	// Retry's rows carry the error cut to size and the delay split.
	q2, _, f2 := newFakeQueue(t, Config{}, answerOK)
	c2, _ := q2.NewClaimer(ctx)
	long := strings.Repeat("é", queue.MaxErrorBytes)
	if err := c2.Retry(ctx, []queue.RetryParams{{Lease: queue.Lease{ID: 4, Token: 5}, Error: long, Delay: 90*time.Second + 250*time.Millisecond, Dead: true}}); err != nil {
		t.Fatal(err)
	}
	a := f2.named(sqlRetry)[0].args
	if e := a["e0"].(string); len(e) != queue.MaxErrorBytes || !strings.HasPrefix(long, e) {
		t.Errorf("error of %d bytes sent", len(e))
	}
	if a["ds0"] != int32(90) || a["dm0"] != int32(250) || a["dd0"] != int32(1) {
		t.Errorf("delay and dead sent as %v %v %v", a["ds0"], a["dm0"], a["dd0"])
	}
}

// Statements over leases run again when chosen as a deadlock victim: the
// victim's statement was rolled back and the token match makes a rerun
// safe.
func TestLeaseStatementsRetryDeadlocks(t *testing.T) {
	ctx := context.Background()
	victim := map[string]bool{}
	q, _, f := newFakeQueue(t, Config{}, func(s sentStmt) fakeAnswer {
		if s.name != sqlClaim && s.name != sqlRescue && !victim[s.name] {
			victim[s.name] = true
			return fakeAnswer{err: fmt.Errorf("driver: %w", serverErr(1205))}
		}
		return answerOK(s)
	})
	c, _ := q.NewClaimer(ctx)
	jobs, err := c.Claim(ctx, "q", 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Extend(ctx, []queue.Lease{jobs[0].Lease()}); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if err := c.Complete(ctx, []queue.Lease{jobs[0].Lease()}); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if err := c.Retry(ctx, []queue.RetryParams{{Lease: jobs[1].Lease()}}); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	if err := c.Release(ctx, []queue.Lease{jobs[2].Lease()}); err != nil {
		t.Fatalf("Release: %v", err)
	}
	for _, name := range []string{sqlExtend, sqlComplete, sqlRetry, sqlRelease} {
		if n := len(f.named(name)); n != 2 {
			t.Errorf("%s sent %d times, want 2", name, n)
		}
	}
}

func TestSplitDurationAndTruncate(t *testing.T) {
	for _, tc := range []struct {
		d     time.Duration
		s, ms int32
	}{
		{0, 0, 0}, {-time.Hour, 0, 0}, {1500 * time.Millisecond, 1, 500}, {999 * time.Microsecond, 0, 0},
		{30 * 24 * time.Hour, 30 * 24 * 3600, 0}, {1 << 62, 1<<31 - 1, int32((time.Duration(1<<62) % time.Second) / time.Millisecond)},
	} {
		if s, ms := splitDuration(tc.d); s != tc.s || ms != tc.ms {
			t.Errorf("splitDuration(%v) = %d, %d; want %d, %d", tc.d, s, ms, tc.s, tc.ms)
		}
	}
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"}, {"abcdef", 3, "abc"}, {"aé", 2, "a"}, {"éé", 3, "é"}, {"€", 2, ""},
	} {
		if got := truncateUTF8(tc.s, tc.n); got != tc.want {
			t.Errorf("truncateUTF8(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
