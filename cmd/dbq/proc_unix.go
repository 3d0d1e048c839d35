//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// ownGroup makes c the leader of a new process group, so that a signal to
// dbq's group (a terminal's Ctrl-C) does not reach it.
func ownGroup(c *exec.Cmd) { c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// signalGroup sends sig to the process group p leads. A group already
// gone is no error worth reporting.
func signalGroup(p *os.Process, sig syscall.Signal) { _ = syscall.Kill(-p.Pid, sig) }
