package mysql

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	mysqldrv "github.com/go-sql-driver/mysql"
)

// These tests need no server.

func TestStatementsRender(t *testing.T) {
	st, err := newStatements(dialect.Names{Schema: "app", Prefix: "q1_"}, 7)
	if err != nil {
		t.Fatal(err)
	}
	ts := st.files.Names()
	// Placeholders per statement for a list of n.
	want := map[string]func(n int) int{
		sqlEnqueue:          func(n int) int { return 9 * n },
		sqlEnqueueIDs:       func(int) int { return 3 },
		sqlClaimCandidates:  func(int) int { return 3 },
		sqlClaimLock:        func(n int) int { return n + 3 },
		sqlClaimUpdate:      func(n int) int { return n + 2 },
		sqlClaimRead:        func(n int) int { return n + 1 },
		sqlLeaseLock:        func(n int) int { return n },
		sqlComplete:         func(n int) int { return 3 * n },
		sqlRelease:          func(n int) int { return 3 * n },
		sqlExtend:           func(n int) int { return 3*n + 1 },
		sqlRetry:            func(n int) int { return 11 * n },
		sqlRescueQueues:     func(int) int { return 0 },
		sqlRescueCandidates: func(int) int { return 2 },
		sqlRescueLock:       func(n int) int { return n },
		sqlRescue:           func(n int) int { return n },
		sqlStats:            func(int) int { return 0 },
		sqlStatsByKind:      func(int) int { return 0 },
		sqlServer:           func(int) int { return 0 },
		sqlServerWsrep:      func(int) int { return 0 },
		sqlSession:          func(int) int { return 0 },
		sqlConnectionID:     func(int) int { return 0 },

		sqlEnqueueUnique:       func(int) int { return 8 },
		sqlJobs:                func(int) int { return 2 }, // no filter; TestJobsStatement has the rest
		sqlCancelLock:          func(n int) int { return n },
		sqlCancel:              func(n int) int { return n },
		sqlRetryDeadCandidates: func(int) int { return 2 },
		sqlRetryDeadLock:       func(n int) int { return n + 1 },
		sqlRetryDead:           func(n int) int { return n },
		sqlSetPaused:           func(int) int { return 3 },
		sqlPaused:              func(int) int { return 0 },
		sqlRescueGetLock:       func(int) int { return 1 },
		sqlRescueReleaseLock:   func(int) int { return 1 },
	}
	// The statements that name no table, and those of the queues table.
	noTable := map[string]bool{sqlServer: true, sqlServerWsrep: true, sqlSession: true, sqlConnectionID: true, sqlRescueGetLock: true, sqlRescueReleaseLock: true}
	queuesOnly := map[string]bool{sqlSetPaused: true, sqlPaused: true}
	if len(ts) != len(want)+len(schedulePlaceholders)+len(activityPlaceholders)+len(countPlaceholders) {
		t.Errorf("%d statement files, %d known", len(ts), len(want))
	}
	for name, count := range want {
		for _, n := range []int{1, 3, 300} {
			q := st.get(name, n)
			if got := strings.Count(q, "?"); got != count(n) {
				t.Errorf("%s(%d): %d placeholders, want %d:\n%s", name, n, got, count(n), q)
			}
			if strings.Contains(q, "{{") || strings.Contains(q, "--") {
				t.Errorf("%s: template or comment left:\n%s", name, q)
			}
			if !noTable[name] && !queuesOnly[name] && !strings.Contains(q, "`app`.`q1_jobs`") {
				t.Errorf("%s: does not name the table `app`.`q1_jobs`:\n%s", name, q)
			}
			if queuesOnly[name] && !strings.Contains(q, "`app`.`q1_queues`") {
				t.Errorf("%s: does not name the table `app`.`q1_queues`:\n%s", name, q)
			}
			if strings.Contains(q, "dbq_") {
				t.Errorf("%s: hard-coded name:\n%s", name, q)
			}
		}
	}
	if q := st.get(sqlSession, 0); !strings.Contains(q, "innodb_lock_wait_timeout = 7") {
		t.Errorf("session: %s", q)
	}
	// Claims skip a paused queue, in both steps.
	for _, name := range []string{sqlClaimCandidates, sqlClaimLock} {
		if q := st.get(name, 5); !strings.Contains(q, "NOT EXISTS (SELECT 1 FROM `app`.`q1_queues` WHERE queue = ? AND paused)") {
			t.Errorf("%s does not skip a paused queue:\n%s", name, q)
		}
	}
	// The locking statements go by primary key only.
	for _, name := range []string{sqlClaimLock, sqlLeaseLock, sqlRescueLock, sqlCancelLock, sqlRetryDeadLock} {
		q := st.get(name, 5)
		if !strings.Contains(q, "FORCE INDEX (PRIMARY)") || !strings.Contains(q, "FOR UPDATE") {
			t.Errorf("%s does not lock by primary key:\n%s", name, q)
		}
	}
	for _, name := range []string{sqlClaimLock, sqlRescueLock} {
		if !strings.Contains(st.get(name, 5), "SKIP LOCKED") {
			t.Errorf("%s waits on locked rows", name)
		}
	}
	for _, name := range []string{sqlClaimUpdate, sqlComplete, sqlRelease, sqlExtend, sqlRetry, sqlRescue, sqlCancel, sqlRetryDead} {
		q := st.get(name, 5)
		if !strings.Contains(q, "WHERE id IN (?, ?, ?, ?, ?)") {
			t.Errorf("%s does not name rows by primary key:\n%s", name, q)
		}
	}
	// The statements that make rows a claim's or give them back change
	// only rows still in the state they were read in: the lock before them
	// may have locked nothing (TiDB's SKIP LOCKED; issue #23).
	for name, guard := range map[string]string{
		sqlClaimUpdate: "AND state = 'ready' AND run_at <= UTC_TIMESTAMP(6)",
		sqlClaimRead:   "AND state = 'claimed' AND claim_token = ?",
		sqlRescue:      "AND state = 'claimed' AND claimed_until < UTC_TIMESTAMP(6)",
		sqlComplete:    "AND state = 'claimed'\n  AND claim_token = CASE id",
		sqlRetry:       "AND state = 'claimed'\n  AND claim_token = CASE id",
		sqlRelease:     "AND state = 'claimed'\n  AND claim_token = CASE id",
		sqlExtend:      "AND state = 'claimed'\n  AND claim_token = CASE id",
		sqlCancel:      "AND state <> 'claimed'",
		sqlRetryDead:   "AND state = 'dead'",
	} {
		if q := st.get(name, 3); !strings.Contains(q, guard) {
			t.Errorf("%s lacks its guard %q:\n%s", name, guard, q)
		}
	}
	// Neither flavour's private syntax, and TiDB's parser: "+ INTERVAL (…)"
	// reads as the INTERVAL() function there; DATE_ADD is unambiguous.
	for name := range want {
		q := strings.ToUpper(st.get(name, 2))
		for _, bad := range []string{"RETURNING", "FOR SHARE", "NOWAIT", "->>", "WITH ", "+ INTERVAL", "INTERVAL ("} {
			if strings.Contains(q, bad) {
				t.Errorf("%s uses %s", name, bad)
			}
		}
	}
}

func TestStatementsRejectBadNames(t *testing.T) {
	for _, n := range []dialect.Names{{Prefix: "x`; DROP TABLE t; --"}, {Schema: "a b"}, {Prefix: "ü_"}} {
		if _, err := newStatements(n, 5); !errors.Is(err, dialect.ErrInvalidIdentifier) {
			t.Errorf("%+v: %v", n, err)
		}
	}
}

func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		in     string
		flavor Flavor
		v      [3]int
		ok     bool
		iso    string
	}{
		{"8.4.3", MySQL, [3]int{8, 4, 3}, true, "transaction_isolation"},
		{"8.0.36-28", MySQL, [3]int{8, 0, 36}, true, "transaction_isolation"},
		{"8.0.0-dmr", MySQL, [3]int{8, 0, 0}, false, ""},
		{"5.7.44-log", MySQL, [3]int{5, 7, 44}, false, ""},
		{"10.11.19-MariaDB-0+deb12u1", MariaDB, [3]int{10, 11, 19}, true, "tx_isolation"},
		{"5.5.5-10.6.12-MariaDB", MariaDB, [3]int{10, 6, 12}, true, "tx_isolation"},
		{"10.5.23-MariaDB", MariaDB, [3]int{10, 5, 23}, false, ""},
		{"11.4.2-MariaDB", MariaDB, [3]int{11, 4, 2}, true, "transaction_isolation"},
		{"9.1.0", MySQL, [3]int{9, 1, 0}, true, "transaction_isolation"},
		{"8.0.11-TiDB-v7.5.1", TiDB, [3]int{7, 5, 1}, true, "transaction_isolation"},
		{"8.0.11-TiDB-v8.5.0-alpha-12-g1234567", TiDB, [3]int{8, 5, 0}, true, "transaction_isolation"},
		{"5.7.25-TiDB-v5.4.3", TiDB, [3]int{5, 4, 3}, false, ""},
	} {
		s, err := parseVersion(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if s.Flavor != c.flavor || [3]int{s.Major, s.Minor, s.Patch} != c.v {
			t.Errorf("%s: %+v", c.in, s)
		}
		err = s.check()
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrUnsupportedServer)) {
			t.Errorf("%s: check %v", c.in, err)
		}
		if c.ok && s.isolationVar() != c.iso {
			t.Errorf("%s: isolation variable %s", c.in, s.isolationVar())
		}
	}
	// The claimer's session reads candidates in READ UNCOMMITTED, except on
	// TiDB, which refuses it (error 8048).
	for v, want := range map[string]string{
		"10.11.19-MariaDB": "READ UNCOMMITTED", "8.4.3": "READ UNCOMMITTED", "8.0.11-TiDB-v7.5.1": "READ COMMITTED",
	} {
		s, _ := parseVersion(v)
		st, _ := newStatements(dialect.Names{}, 5)
		st.base.CandidateIsolation = s.candidateIsolation()
		if q := st.get(sqlSession, 0); !strings.Contains(q, "SET SESSION TRANSACTION ISOLATION LEVEL "+want+";") {
			t.Errorf("%s: claimer session:\n%s", v, q)
		}
	}
	if _, err := parseVersion("garbage"); !errors.Is(err, ErrUnsupportedServer) {
		t.Errorf("garbage: %v", err)
	}
	if got := (Server{Flavor: MariaDB, Major: 10, Minor: 11, Patch: 19}).String(); got != "MariaDB 10.11.19" {
		t.Errorf("String: %s", got)
	}
}

func TestClassify(t *testing.T) {
	d := &Driver{}
	d.stmts, _ = newStatements(dialect.Names{}, 5)
	me := func(n uint16) error { return fmt.Errorf("wrapped: %w", &mysqldrv.MySQLError{Number: n, Message: "m"}) }
	for _, n := range []uint16{1146, 1176, 1049} {
		err := d.classify("x", me(n))
		if !errors.Is(err, queue.ErrNotMigrated) || !strings.Contains(err.Error(), "dbq migrate up") {
			t.Errorf("%d: %v", n, err)
		}
	}
	for _, n := range []uint16{1205, 1213, 1020, 3572, 3058} {
		err := d.classify("x", me(n))
		var my *mysqldrv.MySQLError
		if !dialect.IsRetryable(err) || !queue.IsRetryable(err) || !errors.As(err, &my) || my.Number != n {
			t.Errorf("%d: %v is not retryable or lost the driver error", n, err)
		}
	}
	// TiDB: a write conflict, and a pessimistic statement that kept
	// meeting newer writes, are expected when claimers race.
	tidb := []*mysqldrv.MySQLError{
		{Number: 9007, Message: "Write conflict, txnStartTS=452, conflictStartTS=451, conflictCommitTS=453, key={tableID=70, handle=3} primary=... [try again later]"},
		{Number: 1105, Message: "pessimistic lock retry limit reached"},
	}
	for _, e := range tidb {
		err := d.classify("x", fmt.Errorf("wrapped: %w", e))
		var my *mysqldrv.MySQLError
		if !dialect.IsRetryable(err) || !errors.As(err, &my) || my != e {
			t.Errorf("TiDB %d %q: %v is not retryable or lost the driver error", e.Number, e.Message, err)
		}
	}
	for _, err := range []error{me(1064), me(1105), errors.New("other")} {
		got := d.classify("x", err)
		if dialect.IsRetryable(got) || errors.Is(got, queue.ErrNotMigrated) || !strings.HasPrefix(got.Error(), "dbq:") {
			t.Errorf("%v classified as %v", err, got)
		}
	}
	if err := d.classify("x", context.Canceled); err != context.Canceled {
		t.Errorf("cancel: %v", err)
	}
	if !isDuplicate(me(1062)) || isDuplicate(me(1213)) {
		t.Error("isDuplicate")
	}
	if !isBadConn(mysqldrv.ErrInvalidConn) || !isBadConn(me(1927)) || isBadConn(me(1213)) {
		t.Error("isBadConn")
	}
}

// TestClassifyGaleraConflict: on a Galera node, error 1213 in a claim is a
// certification conflict (cheap, retried at once); off Galera it is an
// InnoDB deadlock (retried with backoff). A "WSREP detected
// deadlock/conflict" message is a conflict whatever its number and server.
// Neither is a conflict once it is no driver error.
func TestClassifyGaleraConflict(t *testing.T) {
	commitErr := func(e *mysqldrv.MySQLError) error {
		return &commitError{fmt.Errorf("mysql claim commit: %w", e)}
	}
	deadlock := &mysqldrv.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock; try restarting transaction"}
	wsrep := &mysqldrv.MySQLError{Number: 1180, Message: "WSREP detected deadlock/conflict and aborted the transaction. Try restarting the transaction"}
	for _, tc := range []struct {
		name     string
		err      error
		galera   bool
		conflict bool
	}{
		{"1213 at commit on Galera", commitErr(deadlock), true, true},
		{"1213 in a statement on Galera", fmt.Errorf("x: %w", deadlock), true, true},
		{"1213 off Galera", commitErr(deadlock), false, false},
		{"wsrep message on Galera", commitErr(wsrep), true, true},
		{"wsrep message, Galera not detected", wsrep, false, true},
		{"lock wait timeout on Galera", &mysqldrv.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded"}, true, false},
		{"node not ready", &mysqldrv.MySQLError{Number: 1047, Message: "WSREP has not yet prepared node for application use"}, true, false},
		{"text only", errors.New("Deadlock found when trying to get lock"), true, false},
		{"nil", nil, true, false},
	} {
		if got := isConflict(tc.err, tc.galera); got != tc.conflict {
			t.Errorf("%s: isConflict = %v, want %v", tc.name, got, tc.conflict)
		}
	}
	for _, galera := range []bool{false, true} {
		d := &Driver{server: Server{Galera: galera}}
		d.stmts, _ = newStatements(dialect.Names{}, 5)
		for _, e := range []*mysqldrv.MySQLError{deadlock, wsrep, {Number: 1047, Message: "WSREP has not yet prepared node for application use"}} {
			err := d.classify("claim commit", e)
			var my *mysqldrv.MySQLError
			if !dialect.IsRetryable(err) || !errors.As(err, &my) || my != e {
				t.Errorf("galera=%v: %d %q: %v is not retryable or lost the driver error", galera, e.Number, e.Message, err)
			}
		}
	}
	if got := (Server{Flavor: MariaDB, Major: 10, Minor: 11, Patch: 19, Galera: true}).String(); got != "MariaDB 10.11.19 (Galera)" {
		t.Errorf("String: %s", got)
	}
}

func TestUTCTime(t *testing.T) {
	want := time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)
	loc := time.FixedZone("X", 5*3600)
	for _, src := range []any{
		"2026-03-04 05:06:07.123456",
		[]byte("2026-03-04 05:06:07.123456"),
		time.Date(2026, 3, 4, 5, 6, 7, 123456000, loc), // parseTime=true, loc=X: same wall clock
		want,
	} {
		var u utcTime
		if err := u.Scan(src); err != nil || !u.Valid || !u.T.Equal(want) || u.T.Location() != time.UTC {
			t.Errorf("%T %v: %v %v", src, src, u.T, err)
		}
	}
	var u utcTime
	if err := u.Scan(nil); err != nil || u.Valid {
		t.Errorf("nil: %+v %v", u, err)
	}
	if err := u.Scan("not a time"); err == nil {
		t.Error("bad text accepted")
	}
	if got := formatTime(want.In(loc)); got != "2026-03-04 05:06:07.123456" {
		t.Errorf("formatTime: %s", got)
	}
}

func TestTruncateError(t *testing.T) {
	for _, s := range []string{
		"short",
		strings.Repeat("é", queue.MaxErrorBytes),
		strings.Repeat("x", queue.MaxErrorBytes-1) + "日本",
		"bad \xff\xfe utf-8",
	} {
		got := truncateError(s)
		if len(got) > queue.MaxErrorBytes || !utf8.ValidString(got) || !strings.HasPrefix(s, got[:min(len(got), 3)]) {
			t.Errorf("%.10q…: %d bytes, valid %v", s, len(got), utf8.ValidString(got))
		}
	}
}

func TestSample(t *testing.T) {
	ids := make([]int64, 1000)
	for i := range ids {
		ids[i] = int64(i)
	}
	if got := sample(ids[:50], 100, 4); !slices.Equal(got, ids[:50]) {
		t.Error("a small window is not taken whole, in order")
	}
	for _, k := range []int{1, 7, 100, 999} {
		got := sample(ids, k, 4)
		if len(got) != k {
			t.Fatalf("k=%d: %d", k, len(got))
		}
		seen := map[int64]bool{}
		runs := 1
		for i, id := range got {
			if seen[id] {
				t.Fatalf("k=%d: %d twice", k, id)
			}
			seen[id] = true
			if i > 0 && id != got[i-1]+1 {
				runs++
			}
		}
		if runs > 4 {
			t.Errorf("k=%d: %d runs", k, runs)
		}
	}
}

func TestDSNForms(t *testing.T) {
	for _, c := range []struct{ in, addr, db, user string }{
		{"mysql://u:p%40ss@db.example:3307/app?charset=utf8mb4", "db.example:3307", "app", "u"},
		{"MYSQL://u@db/app", "db:3306", "app", "u"},
		{"u:p@tcp(127.0.0.1:3306)/app?parseTime=false&loc=Local", "127.0.0.1:3306", "app", "u"},
	} {
		mc, _, err := driverConfig(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if mc.Addr != c.addr || mc.DBName != c.db || mc.User != c.user || !mc.ParseTime || mc.Loc != time.UTC || !mc.InterpolateParams {
			t.Errorf("%s: %+v", c.in, mc)
		}
	}
	_, _, err := driverConfig("u:secret@tcp(host:3306")
	if !errors.Is(err, queue.ErrInvalidConfig) || strings.Contains(err.Error(), "secret") {
		t.Errorf("bad DSN: %v", err)
	}
	if _, err := OpenDB("u:secret@tcp(host:3306"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("OpenDB bad DSN: %v", err)
	}
	db, err := OpenDB("mysql://u:secret@127.0.0.1:1/x")
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = Open(context.Background(), "mysql://u:secret@127.0.0.1:1/x?timeout=200ms", Config{Config: queue.Config{Logger: quiet}})
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("unreachable server: %v", err)
	}
	if _, err := Open(context.Background(), "mysql://u@h/x", Config{MaxSpread: -1}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("bad config: %v", err)
	}
	if _, err := New(nil, Config{}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("nil db: %v", err)
	}
}

// A failed claim COMMIT says so once: "dbq: mysql: claim commit: …", not
// the step twice.
func TestCommitErrorNamesTheStepOnce(t *testing.T) {
	d := &Driver{}
	d.stmts, _ = newStatements(dialect.Names{}, 5)
	err := error(&commitError{d.classify("claim commit", &mysqldrv.MySQLError{Number: 9007, Message: "Write conflict"})})
	if msg := err.Error(); strings.Count(msg, "claim commit") != 1 || !strings.HasPrefix(msg, "dbq: ") || strings.Count(msg, "dbq:") != 1 {
		t.Errorf("commit error reads %q, want the step named once after one dbq: prefix", msg)
	}
}
