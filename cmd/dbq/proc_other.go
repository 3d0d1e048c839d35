//go:build !unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// ownGroup does nothing where there are no process groups.
func ownGroup(*exec.Cmd) {}

// signalGroup kills p: without process groups or SIGTERM, that is all
// there is.
func signalGroup(p *os.Process, _ syscall.Signal) { _ = p.Kill() }
