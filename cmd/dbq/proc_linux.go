package main

import (
	"bytes"
	"os"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// selfExe is the running dbq binary: /proc/self/exe names it even once a
// deploy has replaced or removed the file it was started from.
var selfExe = sync.OnceValues(func() (string, error) {
	if _, err := os.Stat("/proc/self/exe"); err == nil {
		return "/proc/self/exe", nil
	}
	return os.Executable()
})

// becomeSubreaper makes the supervisor the parent of every orphan in the
// command's tree, so that it can kill those that left the command's group.
// A kernel without it (before 3.4) leaves them to init.
func becomeSubreaper() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// jobAttr puts the command in a process group of its own and has it
// killed should the supervisor itself be killed.
func jobAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// children lists the processes whose parent is this one, from /proc.
func children() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	self := os.Getpid()
	var kids []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == self {
			continue
		}
		if ppid(pid) == self {
			kids = append(kids, pid)
		}
	}
	return kids
}

// ppid is the parent of process pid, or 0 if it cannot be read.
func ppid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(string(f[1]))
	return n
}
