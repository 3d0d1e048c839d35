package postgres

import (
	"errors"
	"strings"
	"testing"

	"github.com/dbqueue/dbq/queue"
)

// Tests in this file need no server.

func TestParseDSN(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		dsn            string
		host, user, db string
		port           uint16
		maxConns       int32
	}{
		{"postgres://app:s3cretpw@db.example:6432/jobs", "db.example", "app", "jobs", 6432, DefaultMaxConns},
		{"postgresql://app@db.example/jobs?sslmode=disable", "db.example", "app", "jobs", 5432, DefaultMaxConns},
		{"postgres://app@db.example/jobs?pool_max_conns=3", "db.example", "app", "jobs", 5432, 3},
		{"postgres://app@db.example/jobs?pool_max_conns=40", "db.example", "app", "jobs", 5432, 40},
		{"host=db.example port=6433 user=app password=s3cretpw dbname=jobs", "db.example", "app", "jobs", 6433, DefaultMaxConns},
		{"host=db.example user=app dbname=jobs pool_max_conns=2 default_query_exec_mode=exec", "db.example", "app", "jobs", 5432, 2},
	} {
		pc, _, err := parseDSN(tc.dsn)
		if err != nil {
			t.Errorf("parseDSN(%q): %v", tc.dsn, err)
			continue
		}
		cc := pc.ConnConfig
		if cc.Host != tc.host || cc.User != tc.user || cc.Database != tc.db || cc.Port != tc.port || pc.MaxConns != tc.maxConns {
			t.Errorf("parseDSN(%q) = host %s user %s db %s port %d max %d", tc.dsn, cc.Host, cc.User, cc.Database, cc.Port, pc.MaxConns)
		}
		if _, ok := cc.RuntimeParams["pool_max_conns"]; ok {
			t.Errorf("parseDSN(%q): pool_max_conns left as a server parameter", tc.dsn)
		}
	}
	for _, dsn := range []string{
		"postgres://app:s3cretpw@db.example:notaport/jobs",
		"host=db.example port=bad user=app password=s3cretpw",
		"host=db.example user=app password='s3cretpw",
		"postgres://app:s3cretpw@db.example/jobs?pool_max_conns=many",
		"mysql://app:s3cretpw@db.example/jobs",
	} {
		_, _, err := parseDSN(dsn)
		if !errors.Is(err, queue.ErrInvalidConfig) || strings.Contains(err.Error(), "s3cretpw") || !strings.HasPrefix(err.Error(), "dbq:") {
			t.Errorf("parseDSN(%q): %v", dsn, err)
		}
	}
}

func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{"postgres://u:pw@h/db", "host=h password=pw", "host=h password='p w'", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		pc, _, err := parseDSN(dsn)
		if err == nil && pc == nil || err != nil && !errors.Is(err, queue.ErrInvalidConfig) {
			t.Fatalf("parseDSN(%q) = %v, %v", dsn, pc, err)
		}
	})
}

func TestParseStrategy(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]Strategy{
		"": Advisory, "advisory": Advisory, "Advisory": Advisory, "ADVISORY": Advisory,
		"skiplocked": SkipLocked, "skip_locked": SkipLocked, "skip-locked": SkipLocked, "SkipLocked": SkipLocked,
		"SKIP_LOCKED": SkipLocked,
	} {
		if got, err := ParseStrategy(name); got != want || err != nil {
			t.Errorf("ParseStrategy(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	for _, s := range []Strategy{Advisory, SkipLocked} {
		if got, err := ParseStrategy(s.String()); got != s || err != nil {
			t.Errorf("ParseStrategy(%v.String()) = %v, %v", s, got, err)
		}
	}
	for _, name := range []string{"deletetop", "updlock", "skip locked", "advisory2"} {
		_, err := ParseStrategy(name)
		if !errors.Is(err, queue.ErrInvalidConfig) || !strings.Contains(err.Error(), "advisory") || !strings.Contains(err.Error(), "skiplocked") {
			t.Errorf("ParseStrategy(%q): %v", name, err)
		}
	}
}
