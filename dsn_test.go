package dbq_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dbqueue/dbq"
	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/internal/connwait"
	"github.com/dbqueue/dbq/internal/dbtest"
	"github.com/dbqueue/dbq/queue"
)

// Open and OpenDB return typed errors for a DSN that cannot be used —
// a *dialect.DSNError (ErrBadDSN, ErrInvalidConfig) for a URL whose
// password is not escaped, a *dialect.ConnectError for a connection that
// failed, on the real servers — and a refused connection is still one
// that --wait-for-db waits for (connwait.Unreachable sees through the
// wrapper).
func TestOpenDSNErrorsTyped(t *testing.T) {
	const pw = "Kq3v@Frag2x?Frag3y#Frag4z/Frag5w:Frag6v"
	esc := url.UserPassword("root", pw).String()
	my := "127.0.0.1:3306"
	if u, err := url.Parse(dbtest.DSN(dialect.MySQL)); err == nil && u.Host != "" {
		my = u.Host
	}
	for _, c := range []struct {
		dsn          string
		bad, unreach bool
		cause        string
	}{
		{"postgres://root:" + pw + "@127.0.0.1:5432/test", true, false, "URL-escaped"},
		{"mysql://root:" + pw + "@" + my + "/test", true, false, "URL-escaped"},
		{"sqlserver://root:" + pw + "@127.0.0.1:1", true, false, "URL-escaped"},
		{"postgres://" + esc + "@127.0.0.1:1/test?connect_timeout=5", false, true, "connection refused"},
		{"mysql://" + esc + "@127.0.0.1:1/test?timeout=5s", false, true, "connection refused"},
		{"mariadb://" + esc + "@" + my + "/test?timeout=5s", false, false, "Access denied"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		q, err := dbq.Open(ctx, c.dsn, dbq.Options{})
		_, _, errDB := dbq.OpenDB(ctx, c.dsn)
		cancel()
		if q != nil {
			q.Close()
			t.Errorf("Open(%q) succeeded", c.dsn)
			continue
		}
		if strings.Contains(c.cause, "Access") && dbtest.CannotConnect(err) {
			dbtest.Unreachable(t, dialect.MySQL, err)
		}
		for _, err := range []error{err, errDB} {
			var de *dialect.DSNError
			var ce *dialect.ConnectError
			switch {
			case c.bad && (!errors.As(err, &de) || !errors.Is(err, queue.ErrBadDSN) || !errors.Is(err, queue.ErrInvalidConfig)):
				t.Errorf("%q: %v, want a DSNError", c.dsn, err)
			case !c.bad && !errors.As(err, &ce):
				t.Errorf("%q: %v, want a ConnectError", c.dsn, err)
			case connwait.Unreachable(err) != c.unreach:
				t.Errorf("%q: Unreachable(%v) = %v, want %v", c.dsn, err, !c.unreach, c.unreach)
			case !strings.Contains(err.Error(), c.cause):
				t.Errorf("%q: %v, want it to name %q", c.dsn, err, c.cause)
			}
			for _, p := range []string{"Frag2x", "Frag3y", "Frag4z", "Frag5w", "Frag6v"} {
				if err != nil && strings.Contains(err.Error(), p) {
					t.Errorf("%q: %v holds %q of the password", c.dsn, err, p)
				}
			}
		}
	}
}
