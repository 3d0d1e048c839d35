//go:build unix

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A job's command does not run as dbq's child but as its supervisor's:
// dbq starts itself again (selfExe) with superviseArg, and that process,
// the supervisor, starts the command in a process group of its own and
// waits for it. The supervisor outlives dbq by design: it holds the read
// end of a pipe whose write end only dbq holds, so it reads EOF when dbq
// goes, however it goes (kill -9 included), and then ends the command's
// whole tree: SIGTERM to its group, SIGKILL killDelay later. On Linux it
// is a child subreaper, so the command's descendants that leave its group
// (setsid, double forks) become its children when their parents die, and
// are killed too; elsewhere they escape to init.
//
// The supervisor takes orders from dbq alone, one byte each on file 3
// (orderStop, orderKill; EOF stops), and reports on file 4: "exit N" (the
// command's raw wait status) or "start ERROR" (the command did not start).

// superviseArg, as the first argument, makes dbq a job's supervisor.
const superviseArg = "__dbq_supervise_job_v1"

const (
	orderStop = 't' // SIGTERM to the command's group, SIGKILL to its tree killDelay later
	orderKill = 'k' // SIGKILL to its tree now
)

// supervised is a job's command running under its supervisor.
type supervised struct {
	c      *exec.Cmd
	orders *os.File // write end, held by dbq alone
	status *os.File // read end
}

// startJob starts the command path (argv) under a supervisor, with env,
// stdin and stderr; stdout is dbq's.
func startJob(path string, argv, env []string, stdin io.Reader, stderr *os.File) (jobProc, error) {
	self, err := selfExe()
	if err != nil {
		return nil, fmt.Errorf("dbq: cannot start the job's supervisor: %w", err)
	}
	ordersR, ordersW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		ordersR.Close()
		ordersW.Close()
		return nil, err
	}
	c := &exec.Cmd{
		Path:       self,
		Args:       append([]string{"dbq", superviseArg, path}, argv...),
		Env:        env,
		Stdin:      stdin,
		Stdout:     os.Stdout,
		Stderr:     stderr,
		ExtraFiles: []*os.File{ordersR, statusW},
		// Its own group: a terminal's Ctrl-C to dbq's group does not
		// reach it, nor a kill of dbq's whole group.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = c.Start()
	ordersR.Close()
	statusW.Close()
	if err != nil {
		ordersW.Close()
		statusR.Close()
		return nil, fmt.Errorf("dbq: cannot start the job's supervisor: %w", err)
	}
	return &supervised{c: c, orders: ordersW, status: statusR}, nil
}

func (s *supervised) stop() { _, _ = s.orders.Write([]byte{orderStop}) }
func (s *supervised) kill() { _, _ = s.orders.Write([]byte{orderKill}) }

// wait waits for the supervisor and returns the command's end as it
// reported it: nil for exit status 0.
func (s *supervised) wait() error {
	werr := s.c.Wait()
	s.orders.Close()
	line, _ := bufio.NewReader(s.status).ReadString('\n')
	s.status.Close()
	if msg, ok := strings.CutPrefix(line, "start "); ok {
		return errors.New(strings.TrimSpace(msg))
	}
	if n, ok := strings.CutPrefix(line, "exit "); ok {
		if ws, err := strconv.ParseUint(strings.TrimSpace(n), 10, 32); err == nil {
			return waitError(syscall.WaitStatus(ws))
		}
	}
	if werr == nil {
		werr = errors.New("no status reported")
	}
	return fmt.Errorf("dbq: the job's supervisor failed: %w", werr)
}

// waitError is ws as an error, worded as os.ProcessState words it; nil
// for exit status 0.
func waitError(ws syscall.WaitStatus) error {
	var msg string
	switch {
	case ws.Exited() && ws.ExitStatus() == 0:
		return nil
	case ws.Exited():
		msg = "exit status " + strconv.Itoa(ws.ExitStatus())
	case ws.Signaled():
		msg = "signal: " + ws.Signal().String()
	default:
		msg = fmt.Sprintf("wait status %#x", uint32(ws))
	}
	if ws.CoreDump() {
		msg += " (core dumped)"
	}
	return &exitError{msg}
}

// supervise is the supervisor's main: args are the command's path and
// argv. It returns the supervisor's exit status, 0 once it has reported.
func supervise(args []string) int {
	// Pdeathsig (jobAttr) fires when the thread that started the
	// command ends, not the process: keep this goroutine on its thread.
	runtime.LockOSThread()
	orders, status := os.NewFile(3, "orders"), os.NewFile(4, "status")
	if len(args) < 2 || orders == nil || status == nil || !isPipe(3) || !isPipe(4) {
		fmt.Fprintln(os.Stderr, "dbq: the job supervisor runs under dbq work only")
		return 2
	}
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	// Caught, not ignored: caught signals are reset for the command,
	// ignored ones would stay ignored in it. A terminal's or a service
	// manager's signals are dbq's to act on, and a write to the stderr
	// of a dbq that died must not end the supervisor (SIGPIPE).
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	becomeSubreaper()
	p, err := os.StartProcess(args[0], args[1:], &os.ProcAttr{
		Env: os.Environ(), Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}, Sys: jobAttr(),
	})
	if err != nil {
		fmt.Fprintf(status, "start %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return 0
	}
	// The command holds these now; dbq's payload writer gets EPIPE as
	// soon as the command is gone.
	os.Stdin.Close()
	os.Stdout.Close()
	got := make(chan byte, 1)
	go readOrders(orders, got)
	t := &tree{pid: p.Pid}
	t.run(got, sigs)
	if !t.exited { // reaped by someone else: dbq reports a failure
		return 1
	}
	fmt.Fprintf(status, "exit %d\n", uint32(t.status))
	return 0
}

// isPipe reports whether fd is an open pipe.
func isPipe(fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO
}

// readOrders sends dbq's orders to got; EOF (dbq has gone) or any error
// is orderStop.
func readOrders(orders *os.File, got chan<- byte) {
	b := make([]byte, 1)
	for {
		if _, err := orders.Read(b); err != nil {
			got <- orderStop
			return
		}
		got <- b[0]
	}
}

// tree is a job's command and whatever it started.
type tree struct {
	pid    int // the command's, and its process group's
	exited bool
	status syscall.WaitStatus
}

// run waits for the command and carries out orders until the command has
// exited and its tree is gone, or killDelay after it exited, with SIGKILL
// sent to all that was left.
func (t *tree) run(orders <-chan byte, sigs <-chan os.Signal) {
	var (
		grace   <-chan time.Time // after orderStop: when SIGKILL follows
		giveUp  <-chan time.Time // after the exit: when to stop waiting for the rest
		rescan  *time.Ticker
		stopped bool
	)
	for {
		gone := t.reap()
		if t.exited && rescan == nil {
			// What the command left behind: SIGKILL to its group (its
			// orphans are init's where there is no subreaper), and to
			// what became our children, again until none is left, as
			// their own orphans come to us in turn.
			t.killAll(!gone)
			if gone = t.reap(); !gone {
				rescan = time.NewTicker(20 * time.Millisecond)
				defer rescan.Stop()
				giveUp = time.After(killDelay)
			}
		}
		if gone {
			return
		}
		var tick <-chan time.Time
		if rescan != nil {
			tick = rescan.C
		}
		select {
		case o := <-orders:
			switch {
			case o == orderKill:
				t.killAll(true)
			case o == orderStop && !stopped:
				stopped = true
				_ = syscall.Kill(-t.pid, syscall.SIGTERM)
				grace = time.After(killDelay)
			}
		case <-grace:
			t.killAll(true)
		case <-tick:
			t.killAll(true)
		case <-giveUp:
			return
		case <-sigs: // SIGCHLD, or one to ignore: reap above
		}
	}
}

// reap collects every child that ended, noting the command's status, and
// reports whether no child is left at all.
func (t *tree) reap() bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case err != nil: // ECHILD
			return true
		case pid == 0:
			return false
		case pid == t.pid:
			t.exited, t.status = true, ws
		}
	}
}

// killAll sends SIGKILL to the command's group and, with kids, to each
// child of the supervisor: the command, and on Linux the orphans of its
// tree (a child not yet reaped keeps its pid: no other process is hit).
func (t *tree) killAll(kids bool) {
	_ = syscall.Kill(-t.pid, syscall.SIGKILL)
	if !kids {
		return
	}
	if !t.exited {
		_ = syscall.Kill(t.pid, syscall.SIGKILL)
	}
	for _, pid := range children() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
