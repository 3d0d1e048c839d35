package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/dbqueue/dbq/dialect"
	"github.com/dbqueue/dbq/queue"
)

// Running a job as a command: `dbq work -- CMD` and --kind routes. Each
// job's command runs under a supervisor (proc_unix.go) that ends its whole
// process tree when the job ends or dbq goes.

// parseKindRoutes reads --kind KIND=CMD flags into kind → argv. A kind
// holds no "=" (queue.ValidateKind), so the first one ends it. Each
// command must resolve now (exec.LookPath): a route to a missing program
// refuses to start rather than fail every job of its kind.
func parseKindRoutes(flags []string) (map[string][]string, error) {
	routes := make(map[string][]string, len(flags))
	for _, r := range flags {
		kind, command, ok := strings.Cut(r, "=")
		argv := strings.Fields(command)
		if !ok || len(argv) == 0 {
			return nil, fmt.Errorf("%w: --kind %q: want KIND=COMMAND", queue.ErrInvalidConfig, r)
		}
		if err := queue.ValidateKind(kind); err != nil {
			return nil, fmt.Errorf("--kind %q: %w", r, err)
		}
		if _, dup := routes[kind]; dup {
			return nil, fmt.Errorf("%w: --kind %s given twice", queue.ErrInvalidConfig, kind)
		}
		if err := resolveCommand("--kind "+kind, argv[0]); err != nil {
			return nil, err
		}
		routes[kind] = argv
	}
	return routes, nil
}

// resolveCommand checks at start that name, the program of what (a flag
// or "the command after --"), can be run.
func resolveCommand(what, name string) error {
	if _, err := exec.LookPath(name); err != nil {
		return fmt.Errorf("%w: %s: command %q cannot be run: %w", queue.ErrInvalidConfig, what, name, err)
	}
	return nil
}

// routeKinds returns the handler that runs each job's command: its kind's
// route, else the default argv; with neither, the job fails with
// queue.ErrUnknownKind and is retried, never run by the wrong command.
func routeKinds(routes map[string][]string, argv, env []string, force <-chan struct{}, log *slog.Logger) queue.Handler {
	handlers := make(map[string]queue.Handler, len(routes))
	for kind, a := range routes {
		handlers[kind] = commandHandler(a, env, force)
	}
	var fallback queue.Handler
	if len(argv) > 0 {
		fallback = commandHandler(argv, env, force)
	}
	return func(ctx context.Context, j *queue.Job) error {
		if h, ok := handlers[j.Kind]; ok {
			return h(ctx, j)
		}
		if fallback != nil {
			return fallback(ctx, j)
		}
		log.Warn("dbq: no --kind route for the job's kind; it will be retried",
			"kind", j.Kind, "queue", j.Queue, "id", j.ID, "attempt", j.Attempt+1, "max_attempts", j.MaxAttempts)
		return fmt.Errorf("%w: kind %q (routes: --kind)", queue.ErrUnknownKind, j.Kind)
	}
}

// killDelay is how long a job's command has between SIGTERM to its
// process group and SIGKILL.
const killDelay = 5 * time.Second

// stderrTail is how much of the end of a command's stderr a run keeps,
// for the job's last error when it fails.
const stderrTail = queue.MaxErrorBytes

// jobProc is a job's running command (startJob).
type jobProc interface {
	// stop sends SIGTERM to the command's process group, and SIGKILL to
	// all it started killDelay later.
	stop()
	// kill sends SIGKILL to the command and all it started, now.
	kill()
	// wait waits for the command's end: nil for exit status 0, an
	// *exitError for any other status.
	wait() error
}

// exitError is a job command's end with a status other than 0, worded as
// os.ProcessState words it ("exit status 3", "signal: killed").
type exitError struct{ msg string }

func (e *exitError) Error() string { return e.msg }

// commandHandler runs argv per job with the payload on stdin, in a process
// group of its own under a supervisor (startJob): a terminal's Ctrl-C
// reaches dbq, which drains, and not the commands, which would die
// mid-job and spend an attempt each. When the job's context ends
// (shutdown timeout, lease lost) the group gets SIGTERM, then SIGKILL
// after killDelay; when force closes (a second Ctrl-C, on which the worker
// is stopped at once: Worker.StopNow), SIGKILL at once, and the job goes
// back with no attempt spent. Whatever the command leaves running is
// killed when it exits, and should dbq die, the supervisor ends the
// command's tree just the same, so no job's processes outlive its run.
// stdout and stderr pass through as they come; only the last stderrTail
// bytes of stderr are kept, for the job's last error.
func commandHandler(argv, env []string, force <-chan struct{}) queue.Handler {
	return func(ctx context.Context, j *queue.Job) error {
		path, err := exec.LookPath(argv[0])
		if err != nil {
			return fmt.Errorf("%s: %w", argv[0], err)
		}
		env := append(env[:len(env):len(env)],
			"DBQ_JOB_ID="+strconv.FormatInt(j.ID, 10),
			"DBQ_JOB_QUEUE="+j.Queue,
			"DBQ_JOB_KIND="+j.Kind,
			"DBQ_JOB_ATTEMPT="+strconv.Itoa(j.Attempt),
		)
		// A pipe of our own rather than exec's: exec would wait for every
		// holder of its write end, which a process that left the group
		// may keep forever.
		pr, pw, err := os.Pipe()
		if err != nil {
			return err
		}
		p, err := startJob(path, argv, env, bytes.NewReader(j.Payload), pw)
		pw.Close()
		if err != nil {
			pr.Close()
			return fmt.Errorf("%s: %w", argv[0], err)
		}
		defer pr.Close()
		stderr := &tail{max: stderrTail}
		copied := make(chan struct{})
		go func() {
			defer close(copied)
			passThrough(os.Stderr, stderr, pr)
		}()

		exited := make(chan struct{})
		var wasForced atomic.Bool
		go func() {
			select {
			case <-exited:
				return
			case <-ctx.Done():
				p.stop()
			case <-force:
				wasForced.Store(true)
				p.kill()
				return
			}
			select {
			case <-exited:
			case <-force:
				wasForced.Store(true)
				p.kill()
			}
		}()
		err = p.wait()
		close(exited)
		select {
		case <-copied:
		case <-time.After(killDelay): // a process that escaped holds stderr
			pr.Close()
			<-copied
		}
		if err == nil {
			return nil
		}
		if wasForced.Load() {
			// Force is followed by Worker.StopNow, which ends the job's
			// context; a run whose context ended is released, so wait for
			// it rather than have the kill count as a failure.
			<-ctx.Done()
			return fmt.Errorf("%s: stopped by a second interrupt: %w", argv[0], err)
		}
		var exit *exitError
		if msg := bytes.TrimSpace(stderr.Bytes()); errors.As(err, &exit) && len(msg) > 0 {
			head := fmt.Sprintf("%s: %v: ", argv[0], err)
			return errors.New(head + lastBytes(string(msg), queue.MaxErrorBytes-len(head)))
		}
		return fmt.Errorf("%s: %w", argv[0], err)
	}
}

// lastBytes returns the end of s, made valid UTF-8, in at most n bytes,
// cut on a character boundary: the job's last error keeps the start of a
// longer message, and what a command printed last matters most.
func lastBytes(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	s = s[len(s)-max(n, 0):]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}

// passThrough copies r to w as it comes, and into t. A failing w (a closed
// stderr) neither stops the copy nor blocks the command.
func passThrough(w io.Writer, t *tail, r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
			_, _ = t.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// jobEnv is the environment of job commands: dbq's own, with the password
// masked in DBQ_DSN. A job has no business with dbq's credentials, and a
// masked DSN fails loudly where an absent one would fall back to
// sqlite:dbq.db.
func jobEnv() []string {
	env := os.Environ()
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if dsn, ok := strings.CutPrefix(kv, "DBQ_DSN="); ok {
			kv = "DBQ_DSN=" + dialect.Redact(dsn)
		}
		out = append(out, kv)
	}
	return out
}

// tail keeps the last max bytes written to it, in at most max bytes of
// memory, however much is written and however (it has no ReadFrom, so
// io.Copy goes through Write).
type tail struct {
	buf []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	n := len(p)
	if t.buf == nil {
		t.buf = make([]byte, 0, t.max)
	}
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = t.buf[:copy(t.buf, t.buf[over:])]
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// Bytes returns what t holds, oldest first.
func (t *tail) Bytes() []byte { return t.buf }
