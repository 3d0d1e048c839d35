package connwait

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestUnreachable(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("no such table"), false},
		{fmt.Errorf("connect: %w", dial), true},
		{fmt.Errorf("ping: %w", driver.ErrBadConn), true},
		{mysql.ErrInvalidConn, true},
		{&pgconn.PgError{Code: "57P03"}, true}, // the database system is starting up
		{&pgconn.PgError{Code: "57P01"}, true}, // terminating connection due to administrator command
		{&pgconn.PgError{Code: "53300"}, true}, // too many connections
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "28P01"}, false}, // password authentication failed
		{&pgconn.PgError{Code: "3D000"}, false}, // database does not exist
		{&pgconn.PgError{Code: "42P01"}, false}, // undefined table
		{&mysql.MySQLError{Number: 1040}, true}, // too many connections
		{&mysql.MySQLError{Number: 1047}, true}, // WSREP has not yet prepared node
		{&mysql.MySQLError{Number: 1045}, false},
		{&mysql.MySQLError{Number: 1049}, false},
	} {
		if got := Unreachable(c.err); got != c.want {
			t.Errorf("Unreachable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestDo(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	ctx := context.Background()

	// Answers on the third try.
	n := 0
	v, err := Do(ctx, time.Minute, nil, func(context.Context) (int, error) {
		if n++; n < 3 {
			return 0, refused
		}
		return 7, nil
	})
	if v != 7 || err != nil || n != 3 {
		t.Errorf("third try answers: %d, %v after %d tries", v, err, n)
	}

	// A refusal no retry can fix ends it at once.
	n = 0
	_, err = Do(ctx, time.Minute, nil, func(context.Context) (int, error) {
		n++
		return 0, &pgconn.PgError{Code: "28P01"}
	})
	if n != 1 || err == nil {
		t.Errorf("bad password: %v after %d tries, want one try", err, n)
	}

	// No wait: one try.
	n = 0
	_, err = Do(ctx, 0, nil, func(context.Context) (int, error) { n++; return 0, refused })
	if n != 1 || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("no wait: %v after %d tries", err, n)
	}

	// The wait runs out, naming itself and keeping the last error.
	_, err = Do(ctx, 250*time.Millisecond, nil, func(context.Context) (int, error) { return 0, refused })
	if !errors.Is(err, syscall.ECONNREFUSED) || !strings.Contains(err.Error(), "within 250ms") {
		t.Errorf("wait ran out: %v", err)
	}

	// ctx ends the wait.
	cctx, cancel := context.WithCancel(ctx)
	n = 0
	_, err = Do(cctx, time.Hour, nil, func(context.Context) (int, error) {
		if n++; n == 2 {
			cancel()
		}
		return 0, refused
	})
	if !errors.Is(err, context.Canceled) || n != 2 {
		t.Errorf("ctx cancelled: %v after %d tries", err, n)
	}
}
