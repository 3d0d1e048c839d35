// Package connwait retries a connect while the database does not answer
// yet: a server still starting or restarting, a socket not there yet, a
// Galera node still joining. Any other error — a bad password, a missing
// database, an unmigrated schema — ends the wait at once, since trying
// again cannot fix it.
package connwait

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// Backoff bounds: the first retry comes after minDelay, each later one
// after twice the last, up to maxDelay.
const (
	minDelay = 100 * time.Millisecond
	maxDelay = 2 * time.Second
	// logEvery spaces the warnings of a long wait.
	logEvery = 10 * time.Second
)

// Do calls open until it succeeds, fails with an error that Unreachable
// does not accept, wait has passed, or ctx ends; it returns open's last
// answer. wait <= 0 calls open once. Each retry after the first failure is
// logged at Warn (then every 10 s) when log is not nil.
func Do[T any](ctx context.Context, wait time.Duration, log *slog.Logger, open func(context.Context) (T, error)) (T, error) {
	v, err := open(ctx)
	if err == nil || wait <= 0 || !Unreachable(err) {
		return v, err
	}
	start := time.Now()
	deadline := start.Add(wait)
	delay := minDelay
	var logged time.Time
	for {
		if log != nil && time.Since(logged) >= logEvery {
			log.Warn("dbq: the database does not answer yet; waiting for it",
				"err", err, "waited", time.Since(start).Round(time.Millisecond), "wait", wait)
			logged = time.Now()
		}
		if time.Now().Add(delay).After(deadline) {
			return v, fmt.Errorf("%w (the database did not answer within %v)", err, wait)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, fmt.Errorf("%w (stopped waiting for the database: %w)", err, context.Cause(ctx))
		case <-t.C:
		}
		delay = min(2*delay, maxDelay)
		if v, err = open(ctx); err == nil || !Unreachable(err) {
			return v, err
		}
	}
}

// Unreachable reports whether err says the database cannot be reached or
// cannot take the session yet, which a later try may find otherwise: no
// connection could be made or it broke (refused, reset, timed out, closed
// at once, host unknown), PostgreSQL is starting, stopping or out of
// connection slots (SQLSTATE class 08, 57P01-57P03, 53300), MySQL is out
// of connections, shutting down, or a Galera node not ready (1040, 1053,
// 1047, 1927).
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) {
		return true
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch {
		case len(pg.Code) == 5 && pg.Code[:2] == "08":
			return true
		case pg.Code == "57P01", pg.Code == "57P02", pg.Code == "57P03", pg.Code == "53300":
			return true
		}
		return false
	}
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		switch my.Number {
		case 1040, 1047, 1053, 1927:
			return true
		}
		return false
	}
	var dns *net.DNSError
	var op *net.OpError
	return errors.As(err, &dns) || errors.As(err, &op)
}
