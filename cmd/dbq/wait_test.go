package main

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbqueue/dbq/dialect"
	"github.com/go-sql-driver/mysql"
)

// TestWorkWaitsForDatabase starts `dbq work` while nothing answers at the
// database's address, as when the server is still starting, and brings
// the server in behind that address a moment later: the worker waits,
// then drains the queue. A wait that runs out, and an error no wait can
// fix (a missing database), end the command.
func TestWorkWaitsForDatabase(t *testing.T) {
	t.Parallel()
	for _, db := range testDBs(t) {
		if db.d == dialect.SQLite {
			continue
		}
		t.Run(string(db.d), func(t *testing.T) {
			t.Parallel()
			g, q := cliDB(t, db)
			mustRun(t, "", append(g, "enqueue", "-q", "wait", "--count", "3", "ok")...)
			target, withAddr := dsnAddr(t, db.d, db.dsn)
			addr := closedAddr(t)
			gw := append([]string(nil), g...)
			gw[1] = withAddr(addr)

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			wctx, stop := context.WithCancel(ctx)
			defer stop()
			done := make(chan error, 1)
			var out string
			go func() {
				var err error
				out, err = dbqCmd(wctx, "", append(gw, "work", "-q", "wait", "--poll", "50ms", "--wait-for-db", "1m", "--", "cat")...)
				done <- err
			}()
			// Let it find the address refusing a few times.
			select {
			case err := <-done:
				t.Fatalf("work ended while the database did not answer yet: %v\n%s", err, out)
			case <-time.After(1500 * time.Millisecond):
			}
			forward(t, addr, target)
			for {
				st, err := q.Stats(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(st) == 0 || st[0].Ready+st[0].Held == 0 {
					break
				}
				select {
				case err := <-done:
					t.Fatalf("work ended with jobs left: %v\n%s", err, out)
				case <-time.After(50 * time.Millisecond):
				}
			}
			stop()
			if err := <-done; err != nil {
				t.Fatalf("work: %v\n%s", err, out)
			}
			if !strings.Contains(out, "3 completed") {
				t.Errorf("work did not complete the 3 jobs:\n%s", out)
			}

			// Nothing ever answers: the wait runs out.
			gw[1] = withAddr(closedAddr(t))
			_, err := dbqCmd(ctx, "", append(gw, "work", "-q", "wait", "--wait-for-db", "300ms", "--", "cat")...)
			if err == nil || !strings.Contains(err.Error(), "did not answer within 300ms") {
				t.Errorf("work on a closed port with --wait-for-db 300ms: %v, want the wait named", err)
			}

			// A missing database is not waited for: the command ends with
			// the server's answer, not with the caller's deadline.
			gw[1] = withDatabase(t, db.d, db.dsn, "dbq_no_such_db")
			short, cancelShort := context.WithTimeout(ctx, 30*time.Second)
			defer cancelShort()
			_, err = dbqCmd(short, "", append(gw, "work", "-q", "wait", "--wait-for-db", "10m", "--", "cat")...)
			if err == nil || strings.Contains(err.Error(), "waiting for the database") || short.Err() != nil {
				t.Errorf("work on a missing database: %v (ctx %v), want the server's refusal at once", err, short.Err())
			}
		})
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// forward listens on addr and copies every connection to target until t
// ends.
func forward(t *testing.T, addr, target string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(s, c); s.Close() }()
			go func() { defer wg.Done(); _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
}

// dsnAddr returns the host:port dsn connects to and a function that
// returns dsn with another address. It reads URL DSNs
// (postgres://, mysql://) and go-sql-driver's user@tcp(host:port)/db.
func dsnAddr(t *testing.T, d dialect.Name, dsn string) (string, func(string) string) {
	t.Helper()
	if u, err := url.Parse(dsn); err == nil && u.Host != "" {
		host := u.Host
		if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), map[dialect.Name]string{dialect.Postgres: "5432", dialect.MySQL: "3306"}[d])
		}
		return host, func(a string) string { v := *u; v.Host = a; return v.String() }
	}
	c, err := mysql.ParseDSN(dsn)
	if d != dialect.MySQL || err != nil || c.Net != "tcp" {
		t.Skipf("cannot read the TCP address of DSN %s", dialect.Redact(dsn))
	}
	return c.Addr, func(a string) string { v := c.Clone(); v.Addr = a; return v.FormatDSN() }
}

// withDatabase returns dsn naming another database.
func withDatabase(t *testing.T, d dialect.Name, dsn, name string) string {
	t.Helper()
	if u, err := url.Parse(dsn); err == nil && u.Host != "" {
		u.Path = "/" + name
		return u.String()
	}
	c, err := mysql.ParseDSN(dsn)
	if d != dialect.MySQL || err != nil {
		t.Skipf("cannot name another database in DSN %s", dialect.Redact(dsn))
	}
	c.DBName = name
	return c.FormatDSN()
}
