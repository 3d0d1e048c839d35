//go:build !unix

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
)

// superviseArg is never used here: commands run as dbq's own children.
const superviseArg = "__dbq_supervise_job_v1"

// supervise refuses: there is no supervisor where there are no process
// groups.
func supervise([]string) int {
	fmt.Fprintln(os.Stderr, "dbq: no job supervisor on this system")
	return 2
}

// direct is a job's command run as dbq's child: killed at once on stop or
// kill, as there is no SIGTERM; nothing ends it should dbq be killed.
type direct struct{ c *exec.Cmd }

func startJob(path string, argv, env []string, stdin io.Reader, stderr *os.File) (jobProc, error) {
	c := &exec.Cmd{Path: path, Args: argv, Env: env, Stdin: stdin, Stdout: os.Stdout, Stderr: stderr}
	if err := c.Start(); err != nil {
		return nil, err
	}
	return direct{c}, nil
}

func (d direct) stop() { _ = d.c.Process.Kill() }
func (d direct) kill() { _ = d.c.Process.Kill() }

func (d direct) wait() error {
	err := d.c.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return &exitError{exit.String()}
	}
	return err
}
