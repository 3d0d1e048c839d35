//go:build linux

package chaos

import (
	"bytes"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dbqueue/dbq/dialect"
)

// worker is one `dbq work --ledger` process.
type worker struct {
	n    int    // its number in the run, from 1
	app  string // its PostgreSQL application_name
	pid  int
	cmd  *exec.Cmd
	logs *stderrTail
	done chan struct{} // closed when it has exited

	// planned is set before the harness kills or stops it, so that its
	// exit is not taken for a crash.
	planned bool // guarded by fleet.mu
}

// fleet runs the workers.
type fleet struct {
	h    *harness
	mu   sync.Mutex
	next int
	all  []*worker
}

func newFleet(h *harness) *fleet { return &fleet{h: h} }

// start starts one more worker.
func (f *fleet) start() (*worker, error) {
	f.mu.Lock()
	f.next++
	n := f.next
	f.mu.Unlock()
	h := f.h
	w := &worker{n: n, app: fmt.Sprintf("%sw%d", h.cfg.Prefix, n), logs: &stderrTail{}, done: make(chan struct{})}
	dsn := h.cfg.DSN
	if h.d == dialect.Postgres {
		u, err := url.Parse(dsn)
		if err != nil {
			return nil, fmt.Errorf("chaos: PostgreSQL DSN is not a URL: %s", dialect.Redact(dsn))
		}
		q := u.Query()
		q.Set("application_name", w.app)
		u.RawQuery = q.Encode()
		dsn = u.String()
	}
	args := []string{"--dsn", dsn, "--prefix", h.cfg.Prefix}
	if h.cfg.Strategy != "" {
		args = append(args, "--strategy", h.cfg.Strategy)
	}
	args = append(args, "work", "--queue", QueueName,
		"--concurrency", fmt.Sprint(h.cfg.Concurrency),
		"--lease", h.cfg.Lease.String(),
		"--poll", "100ms",
		"--shutdown-timeout", "20s",
		"--ledger", h.cfg.Prefix+"ledger",
		"--ledger-delay", h.cfg.HandlerDelay.String())
	w.cmd = exec.Command(h.cfg.Bin, args...)
	w.cmd.Stderr = w.logs
	var logFile *os.File
	if h.cfg.LogDir != "" {
		// The file is named by pid once the process exists; until then
		// it is opened under the worker's number.
		var err error
		logFile, err = os.Create(filepath.Join(h.cfg.LogDir, fmt.Sprintf("worker-%d.log", n)))
		if err != nil {
			return nil, fmt.Errorf("chaos: worker log: %w", err)
		}
		w.cmd.Stderr = io.MultiWriter(w.logs, logFile)
	}
	// Should the harness die, its workers die with it rather than drain
	// a shared database's table forever.
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := w.cmd.Start(); err != nil {
		if logFile != nil {
			logFile.Close()
		}
		return nil, fmt.Errorf("chaos: start worker: %w", err)
	}
	w.pid = w.cmd.Process.Pid
	if logFile != nil {
		_ = os.Rename(logFile.Name(), filepath.Join(h.cfg.LogDir, fmt.Sprintf("worker-%d-%d.log", n, w.pid)))
	}
	f.mu.Lock()
	f.all = append(f.all, w)
	f.mu.Unlock()
	go func() {
		err := w.cmd.Wait()
		if logFile != nil {
			logFile.Close()
		}
		f.mu.Lock()
		planned := w.planned
		f.mu.Unlock()
		if !planned {
			h.problem("worker %d (pid %d) exited by itself: %v; its last log lines:\n%s", w.n, w.pid, err, w.logs.last(20))
		}
		close(w.done)
	}()
	h.logf("started worker %d (pid %d)", w.n, w.pid)
	return w, nil
}

// byPid returns the worker with process id pid, or nil.
func (f *fleet) byPid(pid int) *worker {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.all {
		if w.pid == pid {
			return w
		}
	}
	return nil
}

// alive returns the workers that have not exited, nor been picked to.
func (f *fleet) alive() []*worker {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*worker
	for _, w := range f.all {
		select {
		case <-w.done:
		default:
			if !w.planned {
				out = append(out, w)
			}
		}
	}
	return out
}

func (f *fleet) live() int { return len(f.alive()) }

// plan marks w as about to be killed or stopped by the harness.
func (f *fleet) plan(w *worker) {
	f.mu.Lock()
	w.planned = true
	f.mu.Unlock()
}

// signal sends sig to w.
func (w *worker) signal(sig syscall.Signal) error {
	return syscall.Kill(w.pid, sig)
}

// exited reports whether w has exited.
func (w *worker) exited() bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// stopAll sends SIGTERM to every live worker and waits for each to exit
// with status 0 (a graceful drain), bounded.
func (f *fleet) stopAll() {
	ws := f.alive()
	for _, w := range ws {
		f.plan(w)
		_ = w.signal(syscall.SIGCONT) // in case a fault left it stopped
		_ = w.signal(syscall.SIGTERM)
	}
	for _, w := range ws {
		select {
		case <-w.done:
			if !w.cmd.ProcessState.Success() {
				f.h.problem("worker %d (pid %d) did not exit cleanly on SIGTERM: %s; its last log lines:\n%s",
					w.n, w.pid, w.cmd.ProcessState, w.logs.last(20))
			}
		case <-time.After(60 * time.Second):
			f.h.problem("worker %d (pid %d) did not exit within 60s of SIGTERM", w.n, w.pid)
			_ = w.signal(syscall.SIGKILL)
			<-w.done
		}
	}
}

// killAll kills whatever is still running, for an early return.
func (f *fleet) killAll() {
	f.mu.Lock()
	ws := append([]*worker(nil), f.all...)
	for _, w := range ws {
		w.planned = true
	}
	f.mu.Unlock()
	for _, w := range ws {
		if !w.exited() {
			_ = w.signal(syscall.SIGKILL)
			<-w.done
		}
	}
}

// warnings counts the warnings and errors every worker logged, by level
// and message.
func (f *fleet) warnings() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	all := map[string]int{}
	for _, w := range f.all {
		w.logs.mu.Lock()
		for msg, n := range w.logs.warns {
			all[msg] += n
		}
		w.logs.mu.Unlock()
	}
	return all
}

// stderrTail keeps a worker's last log lines and counts its warnings.
type stderrTail struct {
	mu    sync.Mutex
	buf   bytes.Buffer   // at most 64 KiB, cut at a line
	part  []byte         // an incomplete line
	warns map[string]int // warnings and errors by level and message
}

func (t *stderrTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	data := append(t.part, p...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line := data[:i+1]
		if m := warnRe.FindSubmatch(line); m != nil {
			if t.warns == nil {
				t.warns = map[string]int{}
			}
			t.warns[string(m[1])]++
		}
		t.buf.Write(line)
		data = data[i+1:]
	}
	t.part = append([]byte(nil), data...)
	if over := t.buf.Len() - 64<<10; over > 0 {
		b := t.buf.Bytes()[over:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
		t.buf = *bytes.NewBuffer(append([]byte(nil), b...))
	}
	return len(p), nil
}

// last returns up to n of the last lines, indented.
func (t *stderrTail) last(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimRight(t.buf.String()+string(t.part), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// warnRe finds the level and message of a warning or an error that the
// workers' slog text handler wrote.
var warnRe = regexp.MustCompile(`level=((?:WARN|ERROR) msg="(?:[^"\\]|\\.)*")`)
