package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dbqueue/dbq/queue"
	"github.com/jackc/pgx/v5"
)

var _ queue.Waker = (*Driver)(nil)

// Reconnect backoff of the listener: doubling from the first to the last,
// each wait jittered by ±50% so that many workers do not reconnect at once.
const (
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 10 * time.Second
	// listenSetupTimeout bounds connecting and LISTEN: a server that
	// accepts the connection and never answers makes the listener retry
	// instead of wait until Close.
	listenSetupTimeout = 10 * time.Second
)

// channelName derives the NOTIFY channel of a jobs table from its quoted,
// qualified name: readable when it fits PostgreSQL's 63-byte identifiers,
// else a prefix and a hash, so that two tables never share a channel.
func channelName(table string) string {
	name := "dbq:" + table
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(table))
	return "dbq:" + hex.EncodeToString(sum[:])[:40]
}

// channelArg is the channel parameter of the enqueue statements: NULL when
// notifications are off.
func (d *Driver) channelArg() any {
	if d.cfg.NoNotify {
		return nil
	}
	return d.stmts.channel
}

// Subscribe returns a channel that receives after jobs of q are committed
// by any Enqueue on this table, from any process, and a func that ends the
// subscription. The first Subscribe starts the driver's one listener
// connection (outside the pool); every subscriber also receives once it is
// listening and after each reconnect, since notifications may have been
// missed meanwhile. With Config.NoNotify the channel never receives.
func (d *Driver) Subscribe(q string) (<-chan struct{}, func()) {
	return d.listener.subscribe(d, q)
}

// listener holds the driver's LISTEN connection and its subscribers.
type listener struct {
	mu     sync.Mutex
	subs   map[string]map[chan struct{}]struct{}
	cancel context.CancelFunc // nil until started
	done   chan struct{}
	closed bool
}

func (l *listener) subscribe(d *Driver, q string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || d.cfg.NoNotify {
		return ch, func() {}
	}
	if l.subs == nil {
		l.subs = map[string]map[chan struct{}]struct{}{}
	}
	if l.subs[q] == nil {
		l.subs[q] = map[chan struct{}]struct{}{}
	}
	l.subs[q][ch] = struct{}{}
	if l.cancel == nil {
		// The listener lives as long as the Driver: Close cancels it and
		// waits for it. Each of its waits is bounded by that or, for
		// connecting and LISTEN, by listenSetupTimeout.
		ctx, cancel := context.WithCancel(context.Background())
		l.cancel, l.done = cancel, make(chan struct{})
		go l.run(ctx, d)
	}
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			delete(l.subs[q], ch)
			if len(l.subs[q]) == 0 {
				delete(l.subs, q)
			}
		})
	}
}

// wake sends to the subscribers of q, or of every queue when all is set,
// without blocking: a subscriber with a wake-up pending needs no second.
func (l *listener) wake(q string, all bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for name, subs := range l.subs {
		if !all && name != q {
			continue
		}
		for ch := range subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// run keeps a LISTEN connection open until ctx ends, reconnecting with
// backoff and jitter.
func (l *listener) run(ctx context.Context, d *Driver) {
	defer close(l.done)
	backoff := listenBackoffMin
	for ctx.Err() == nil {
		listening, err := l.listenOnce(ctx, d)
		if ctx.Err() != nil {
			return
		}
		if listening {
			backoff = listenBackoffMin
		}
		d.log.Warn("dbq: postgres: notification listener lost; reconnecting", "err", err, "in", backoff)
		wait := time.Duration(float64(backoff) * (0.5 + rand.Float64()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		backoff = min(2*backoff, listenBackoffMax)
	}
}

// listenOnce connects, listens and delivers notifications until the
// connection fails or ctx ends. listening says whether LISTEN succeeded.
func (l *listener) listenOnce(ctx context.Context, d *Driver) (listening bool, err error) {
	setup, cancel := context.WithTimeout(ctx, listenSetupTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(setup, d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(setup, d.stmts.listen); err != nil {
		return false, err
	}
	// Jobs may have been committed before LISTEN took effect.
	l.wake("", true)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		l.wake(n.Payload, false)
	}
}

// close stops the listener and waits for it.
func (l *listener) close() {
	l.mu.Lock()
	l.closed = true
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
