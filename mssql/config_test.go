package mssql

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq/queue"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.Claimers != 10 || c.Window != 1000 || c.ClaimAttempts != 5 || c.Strategy != DeleteTop ||
		c.Lease != queue.DefaultLease || c.Prefix != "dbq_" || c.MaxAttempts != queue.DefaultMaxAttempts {
		t.Errorf("defaults %+v", c)
	}
	if c := (Config{Claimers: 3}).WithDefaults(); c.Window != 300 {
		t.Errorf("3 claimers: window %d, want 300", c.Window)
	}
	if c := (Config{Claimers: 5000}).WithDefaults(); c.Window != MaxWindow {
		t.Errorf("5000 claimers: window %d, want the cap %d", c.Window, MaxWindow)
	}
	if c := (Config{Claimers: 3, Window: 42}).WithDefaults(); c.Window != 42 {
		t.Errorf("explicit window %d", c.Window)
	}
	if UpdLock.String() != "updlock" || Strategy(9).String() != "Strategy(9)" {
		t.Error("Strategy.String")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want error
	}{
		{"negative claimers", Config{Claimers: -1}, queue.ErrInvalidConfig},
		{"negative window", Config{Window: -1}, queue.ErrInvalidConfig},
		{"window over the cap", Config{Window: MaxWindow + 1}, queue.ErrInvalidConfig},
		{"unknown strategy", Config{Strategy: 7}, queue.ErrInvalidConfig},
		{"negative claim attempts", Config{ClaimAttempts: -1}, queue.ErrInvalidConfig},
		{"too many claim attempts", Config{ClaimAttempts: 101}, queue.ErrInvalidConfig},
		{"lease too short", Config{Config: queue.Config{Lease: time.Microsecond}}, queue.ErrInvalidConfig},
		{"negative max attempts", Config{Config: queue.Config{MaxAttempts: -2}}, queue.ErrInvalidConfig},
		{"bad prefix", Config{Config: queue.Config{Prefix: "x]; DROP TABLE t; --"}}, queue.ErrInvalidIdentifier},
		{"bad schema", Config{Config: queue.Config{Schema: "a b"}}, queue.ErrInvalidIdentifier},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); !errors.Is(err, tc.want) {
				t.Errorf("Validate: %v, want %v", err, tc.want)
			}
			q, _, _ := newFakeQueueOrErr(tc.cfg)
			if q != nil {
				t.Error("New accepted it")
			}
		})
	}
	for _, ok := range []Config{{}, {Strategy: UpdLock}, {Window: MaxWindow, Claimers: 1, ClaimAttempts: 100},
		{Config: queue.Config{Schema: "jobs", Prefix: "app_", Lease: time.Millisecond}}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
	if _, err := New(nil, Config{}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("New(nil): %v", err)
	}
}

// newFakeQueueOrErr is New over a database that is never reached.
func newFakeQueueOrErr(cfg Config) (*queue.Queue, *Driver, error) {
	db, _ := OpenDB("sqlserver://127.0.0.1:1")
	defer db.Close()
	q, err := New(db, cfg)
	if err != nil {
		return nil, nil, err
	}
	return q, q.Driver().(*Driver), nil
}

func TestOpenNeverLeaksThePassword(t *testing.T) {
	const secret = "Hunter2-s3cret"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, dsn := range []string{
		"sqlserver://sa:" + secret + "@127.0.0.1:notaport?database=master", // URL parse error quotes the DSN
		"sqlserver://sa:" + secret + "@127.0.0.1:1433?encrypt=maybe",       // driver option error
		"sqlserver://sa:" + secret + "@127.0.0.1:1?dial+timeout=1",         // nothing listens on port 1
		"sqlserver://sa:" + secret + "@[::1:1433",                          // unparsable host
	} {
		_, err := Open(ctx, dsn, Config{})
		if err == nil {
			t.Errorf("%s: opened", dsn)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error holds the password: %v", err)
		}
		if !strings.HasPrefix(err.Error(), "dbq: ") {
			t.Errorf("error %q does not start with dbq:", err)
		}
	}
	for _, dsn := range []string{"postgres://u:p@h/db", "nonsense"} {
		if _, err := OpenDB(dsn); !errors.Is(err, queue.ErrUnknownScheme) {
			t.Errorf("OpenDB(%q): %v, want ErrUnknownScheme", dsn, err)
		}
	}
	if _, err := Open(ctx, "sqlserver://127.0.0.1:1", Config{Window: -1}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("Open with a bad config: %v", err)
	}
}

func TestEnqueueRejectsOtherTransactions(t *testing.T) {
	q, _, f := newFakeQueue(t, Config{}, answerOK)
	_, err := q.EnqueueTx(context.Background(), struct{}{}, queue.NewJob{Queue: "q"})
	if !errors.Is(err, queue.ErrUnsupportedTx) {
		t.Errorf("EnqueueTx(struct{}): %v", err)
	}
	if n := len(f.statements()); n != 0 {
		t.Errorf("%d statements sent", n)
	}
	if q.Dialect() != "mssql" {
		t.Errorf("dialect %q", q.Dialect())
	}
}

func TestStatsScan(t *testing.T) {
	q, _, _ := newFakeQueue(t, Config{}, answerOK)
	st, err := q.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := queue.QueueStats{Queue: "q", Ready: 1, Scheduled: 2, Held: 3, Dead: 4, OldestReadyAge: 1.5, Paused: true}
	if len(st) != 1 || st[0] != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
}

func TestClosedQueueClosesClaimers(t *testing.T) {
	ctx := context.Background()
	q, d, f := newFakeQueue(t, Config{}, answerOK)
	c, _ := q.NewClaimer(ctx)
	jobs, err := c.Claim(ctx, "q", 1)
	if err != nil {
		t.Fatal(err)
	}
	sent := len(f.statements())
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Claim(ctx, "q", 1); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Claim: %v", err)
	}
	if err := c.Complete(ctx, []queue.Lease{jobs[0].Lease()}); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Complete: %v", err)
	}
	if _, err := d.Rescue(ctx); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Rescue: %v", err)
	}
	if err := c.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	if n := len(f.statements()); n != sent {
		t.Errorf("%d statements sent after Close", n-sent)
	}
}
