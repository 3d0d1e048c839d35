package postgres

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tests in this file need no server.

func TestStatementsSpliceOnlyTheQuotedTable(t *testing.T) {
	t.Parallel()
	s, err := loadStatements(dialect.Names{Schema: "tenant_1", Prefix: "app_"})
	if err != nil {
		t.Fatal(err)
	}
	if s.table != `"tenant_1"."app_jobs"` || s.queues != `"tenant_1"."app_queues"` {
		t.Fatalf("tables %s, %s", s.table, s.queues)
	}
	files, _ := fs.Glob(sqlFiles, "sql/*.sql")
	v := reflect.ValueOf(*s)
	notStatements := map[string]bool{"table": true, "queues": true, "rescueKey": true, "channel": true}
	if got, want := v.NumField()-len(notStatements), len(files); got != want {
		t.Fatalf("%d statements loaded, %d files in sql/", got, want)
	}
	for i := range v.NumField() {
		name, texts := v.Type().Field(i).Name, []string{v.Field(i).String()}
		if notStatements[name] {
			continue
		}
		if f := v.Field(i); f.Kind() == reflect.Map { // one statement per variant
			texts = texts[:0]
			for it := f.MapRange(); it.Next(); {
				texts = append(texts, it.Value().String())
			}
		}
		for _, text := range texts {
			if text == "" || strings.Contains(text, "{{") {
				t.Errorf("%s: empty or marker left: %q", name, text)
			}
			if strings.Contains(text, "dbq_jobs") {
				t.Errorf("%s names the default table", name)
			}
		}
	}
	if len(s.jobs) != 16 {
		t.Errorf("%d jobs statements, want one per filter: 16", len(s.jobs))
	}
	for f, text := range s.jobs {
		switch {
		case f.Kind && !strings.Contains(text, fmt.Sprintf("j.kind = $%d", f.KindParam())):
			t.Errorf("jobs %+v filters no kind on $%d:\n%s", f, f.KindParam(), text)
		case !f.Kind && strings.Contains(text, "j.kind ="):
			t.Errorf("jobs %+v filters a kind:\n%s", f, text)
		}
	}
	if !strings.Contains(s.claimAdvisory, `FROM "tenant_1"."app_jobs"`) {
		t.Errorf("claim does not read the configured table:\n%s", s.claimAdvisory)
	}
	for _, bad := range []dialect.Names{{Schema: `x"; DROP TABLE y; --`}, {Prefix: "a b"}, {Schema: "1abc"}} {
		if _, err := loadStatements(bad); !errors.Is(err, queue.ErrInvalidIdentifier) {
			t.Errorf("loadStatements(%+v): %v", bad, err)
		}
	}
	def, err := loadStatements(dialect.Names{})
	if err != nil || def.table != `"dbq_jobs"` {
		t.Fatalf("default table %q, %v", def.table, err)
	}
}

func TestFold(t *testing.T) {
	t.Parallel()
	for id, want := range map[int64]int32{
		0: 0, 5: 5, 1<<31 - 1: 1<<31 - 1, 1 << 31: -1 << 31, 1<<32 - 1: -1, 1 << 32: 0, 1<<32 + 5: 5,
	} {
		if got := fold(id); got != want {
			t.Errorf("fold(%d) = %d, want %d", id, got, want)
		}
	}
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", queue.MaxErrorBytes)
	for in, wantLen := range map[string]int{
		"boom":                     4,
		long:                       queue.MaxErrorBytes,
		"x" + long:                 queue.MaxErrorBytes - 1,
		"a\x00b":                   len("a\uFFFDb"),
		string([]byte{0xff, 'a'}):  len("\uFFFDa"),
		strings.Repeat("a", 10000): queue.MaxErrorBytes,
	} {
		got := errorText(in)
		if len(got) != wantLen || !utf8.ValidString(got) || strings.Contains(got, "\x00") {
			t.Errorf("errorText(%.10q…) = %d bytes (valid %v), want %d", in, len(got), utf8.ValidString(got), wantLen)
		}
	}
}

func TestInterpret(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return &pgconn.PgError{Code: code, Message: "m"} }
	for code, target := range map[string]error{
		"42P01": queue.ErrNotMigrated,
		"3F000": queue.ErrNotMigrated,
		"23505": queue.ErrDuplicate,
	} {
		err := interpret("op", pg(code))
		var pgErr *pgconn.PgError
		if !errors.Is(err, target) || !errors.As(err, &pgErr) || pgErr.Code != code || !strings.HasPrefix(err.Error(), "dbq:") {
			t.Errorf("%s: %v", code, err)
		}
	}
	for _, code := range []string{"40001", "40P01", "55P03"} {
		err := interpret("op", pg(code))
		var r *dialect.RetryableError
		var pgErr *pgconn.PgError
		if !queue.IsRetryable(err) || !errors.As(err, &r) || !errors.As(err, &pgErr) || pgErr.Code != code {
			t.Errorf("%s: %v is not retryable", code, err)
		}
	}
	if err := interpret("claim", pg("22001")); queue.IsRetryable(err) || !strings.HasPrefix(err.Error(), "dbq: postgres: claim:") {
		t.Errorf("22001: %v", err)
	}
	if interpret("x", nil) != nil {
		t.Error("interpret(nil) != nil")
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	if _, err := New(nil, Config{}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("New(nil): %v", err)
	}
	// A pool connects lazily: no server needed.
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for cfg, target := range map[*Config]error{
		{Strategy: Strategy(7)}:                            queue.ErrInvalidConfig,
		{Config: queue.Config{Schema: "bad schema"}}:       queue.ErrInvalidIdentifier,
		{Config: queue.Config{Prefix: `p"`}}:               queue.ErrInvalidIdentifier,
		{Config: queue.Config{Lease: -1}}:                  queue.ErrInvalidConfig,
		{Config: queue.Config{MaxAttempts: -3}}:            queue.ErrInvalidConfig,
		{Config: queue.Config{MaxPayloadBytes: -1}}:        queue.ErrInvalidConfig,
		{Config: queue.Config{Schema: "ok", Prefix: "x_"}}: nil,
	} {
		q, err := New(pool, *cfg)
		if !errors.Is(err, target) || (err == nil) != (q != nil) {
			t.Errorf("New(%+v): %v, want %v", *cfg, err, target)
		}
	}
	if SkipLocked.String() != "skiplocked" || Advisory.String() != "advisory" {
		t.Error("Strategy.String")
	}
}

func TestClaimValidatesBeforeTouchingTheDatabase(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d, err := newDriver(pool, false, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []queue.Claimer{newAdvisoryClaimer(d), newSkipLockedClaimer(d)} {
		ctx := context.Background()
		if _, err := c.Claim(ctx, "q", 0); !errors.Is(err, queue.ErrInvalidLimit) {
			t.Errorf("%T n=0: %v", c, err)
		}
		if _, err := c.Claim(ctx, "bad name", 1); !errors.Is(err, queue.ErrInvalidQueue) {
			t.Errorf("%T bad queue: %v", c, err)
		}
		if err := c.Close(ctx); err != nil {
			t.Errorf("%T Close: %v", c, err)
		}
		if _, err := c.Claim(ctx, "q", 1); !errors.Is(err, queue.ErrClosed) {
			t.Errorf("%T after Close: %v", c, err)
		}
	}
}

func TestOpenNeverShowsThePassword(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10e9)
	defer cancel()
	for _, dsn := range []string{
		"postgres://app:s3cretpw@127.0.0.1:1/db?connect_timeout=2",
		"postgres://app:s3cretpw@127.0.0.1:notaport/db",
		"host=127.0.0.1 port=1 user=app password=s3cretpw connect_timeout=2",
		"host=127.0.0.1 port=bad user=app password=s3cretpw",
	} {
		_, err := Open(ctx, dsn, Config{})
		if err == nil || strings.Contains(err.Error(), "s3cretpw") || !strings.HasPrefix(err.Error(), "dbq:") {
			t.Errorf("Open(%s): %v", dialect.Redact(dsn), err)
		}
		if _, err := OpenDB(dsn); err != nil && strings.Contains(err.Error(), "s3cretpw") {
			t.Errorf("OpenDB(%s): %v", dialect.Redact(dsn), err)
		}
	}
	if _, err := Open(ctx, "postgres://127.0.0.1/db", Config{Strategy: 9}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("Open with a bad strategy: %v", err)
	}
}

// TestAdvisoryRefusedOnCockroachDB: a server that reports crdb_version
// (CockroachDB, whose advisory lock functions lock nothing) is refused for
// the advisory claimer, naming the SKIP LOCKED strategy; PostgreSQL, which
// reports no such parameter, is not.
func TestAdvisoryRefusedOnCockroachDB(t *testing.T) {
	crdb := map[string]string{"crdb_version": "CockroachDB CCL v24.1.0 (x86_64-pc-linux-gnu)", "server_version": "13.0.0"}
	err := advisoryLocksHold(func(k string) string { return crdb[k] })
	if !errors.Is(err, queue.ErrUnsupportedServer) || !strings.Contains(err.Error(), "skiplocked") || !strings.Contains(err.Error(), "CockroachDB") {
		t.Fatalf("on CockroachDB: %v, want ErrUnsupportedServer naming skiplocked", err)
	}
	pg := map[string]string{"server_version": "15.19"}
	if err := advisoryLocksHold(func(k string) string { return pg[k] }); err != nil {
		t.Fatalf("on PostgreSQL: %v", err)
	}
}

// TestSkipLockedCandidatesReadOnce: the SKIP LOCKED claim reads its
// candidates in a MATERIALIZED CTE that the UPDATE joins, never in a
// subquery the join could run again. Run again on the inner side of a
// nested loop (a plan the planner chose after an autoanalyze, under
// plan.sql's settings), each run skipped the rows the statement had just
// updated and locked the next ones: a claim of 32 updated 59, and the
// Worker, handed more jobs than it had slots, stopped.
func TestSkipLockedCandidatesReadOnce(t *testing.T) {
	s, err := loadStatements(dialect.Names{Prefix: "dbq_"})
	if err != nil {
		t.Fatal(err)
	}
	sql := s.claimSkipLocked
	if !strings.Contains(sql, "c AS MATERIALIZED (") || !strings.Contains(sql, "\nFROM c\nWHERE t.id = c.id") {
		t.Fatalf("claim_skiplocked.sql does not read its candidates once, in a MATERIALIZED CTE:\n%s", sql)
	}
	if strings.Contains(sql, ") AS c\n") {
		t.Fatalf("claim_skiplocked.sql joins a subquery of candidates:\n%s", sql)
	}
}
