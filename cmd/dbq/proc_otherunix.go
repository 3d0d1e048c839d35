//go:build unix && !linux

package main

import (
	"os"
	"sync"
	"syscall"
)

// selfExe is the running dbq binary.
var selfExe = sync.OnceValues(os.Executable)

// becomeSubreaper does nothing: without Linux's child subreaper, what
// leaves the command's group is left to init.
func becomeSubreaper() {}

// jobAttr puts the command in a process group of its own.
func jobAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// children lists none: no orphan of the command's tree comes back to the
// supervisor, and the command itself is killed by pid.
func children() []int { return nil }
